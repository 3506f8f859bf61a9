"""Zoo: an FSDP scanned decoder over an explicit 4-device mesh (issue 42):
8 layers whose weights are stacked and sharded over `data` on their input
dimension (the batch too), run by `jax.lax.scan` over a
`jax.checkpoint(decoder_layer, prevent_cse=False)`. Each layer gathers its
weights (`reshard` to replicated: what FSDP does per layer), rotates q and k
with a complex rope, and names qkv, attn and mlp_out; its per-example
auxiliary loss is stacked by the scan (`ys`, split over `data`).

`make_loss(policy)`: the same decoder with the layer's checkpoint given
`policy` (NO_CHECKPOINT: the layer scanned without it). The registered
target `loss` uses `WRITTEN`, `save_only_these_names('attn')`. The
arguments are sharded over the chosen device set's first 4 devices
(`devices`); with one device (`devices=[d]`) the mesh is a 1-device one.
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import remat_tui

LAYERS, WIDTH, SEQ, BATCH, MLP = 8, 16, 8, 4, 32
NO_CHECKPOINT = "no checkpoint"
WRITTEN = jax.checkpoint_policies.save_only_these_names("attn")


def gathered(w):
    """A layer's weight, gathered whole on every device (FSDP)."""
    return jax.sharding.reshard(w, NamedSharding(jax.typeof(w).sharding.mesh, P()))


def rope(x):
    """x: [batch, seq, width], rotated by position as width // 2 complex pairs."""
    pairs = x.reshape(*x.shape[:-1], WIDTH // 2, 2)
    z = jax.lax.complex(pairs[..., 0], pairs[..., 1])
    freqs = 1.0 / 10000 ** (jnp.arange(WIDTH // 2) / (WIDTH // 2))
    theta = jnp.arange(SEQ)[:, None] * freqs[None, :]
    z = z * jnp.exp(1j * theta)
    return jnp.stack([z.real, z.imag], axis=-1).reshape(x.shape)


def decoder_layer(x, w):
    w = jax.tree.map(gathered, w)
    qkv = checkpoint_name(x @ w["wqkv"], "qkv")
    q, k, v = rope(qkv[..., :WIDTH]), rope(qkv[..., WIDTH : 2 * WIDTH]), qkv[..., 2 * WIDTH :]
    scores = jnp.einsum("bqd,bkd->bqk", q, k) / WIDTH**0.5
    attn = checkpoint_name(jax.nn.softmax(scores, axis=-1) @ v, "attn")
    x = x + attn @ w["wo"]
    mlp_out = checkpoint_name(jax.nn.gelu(x @ w["wi"]) @ w["wf"], "mlp_out")
    return x + mlp_out, jnp.mean(mlp_out**2, axis=(1, 2))  # per example, split over data


def make_loss(policy=WRITTEN):
    if policy == NO_CHECKPOINT:
        layer = decoder_layer
    else:
        layer = jax.checkpoint(decoder_layer, policy=policy, prevent_cse=False)

    def loss(params, x):
        x, aux = jax.lax.scan(layer, x, params)
        return jnp.mean(x**2) + jnp.mean(aux)

    return loss


def example_args(devices=None, batch=BATCH):
    devices = list(devices if devices is not None else jax.devices())[:4]
    mesh = jax.make_mesh(
        (len(devices),), ("data",), axis_types=(AxisType.Explicit,), devices=devices
    )

    def f32(shape, spec):
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))

    def stacked(rows, cols):  # the layers' weights, each split over data on its rows
        return f32((LAYERS, rows, cols), P(None, "data", None))

    params = {
        "wqkv": stacked(WIDTH, 3 * WIDTH),
        "wo": stacked(WIDTH, WIDTH),
        "wi": stacked(WIDTH, MLP),
        "wf": stacked(MLP, WIDTH),
    }
    return params, f32((batch, SEQ, WIDTH), P("data", None, None))


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
