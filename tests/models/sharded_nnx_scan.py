"""An NNX model as a user training over a mesh writes it (issue 42): blocks
created stacked with `nnx.vmap`, run with `nnx.scan` under `nnx.remat(policy=
save_from_both_policies(dots_saveable, save_only_these_names('attn')))`, the
attention under `jax.shard_map` over the mesh's `data` axis with
`checkpoint_name(..., 'attn')` inside the shard_map'd body, the stacked
weights and the batch split over `data` (FSDP, on an Auto mesh: XLA places
the rest).

`make_loss(mesh, policy, width, dtype)`: the loss over that mesh
(`mesh_of(devices)` builds one over the given devices; `None`: no mesh, no
shard_map), its weights and activations of `dtype`.
`example_args(mesh, batch, seq, width, dtype)`: its arguments. The registered
targets: `sharded` (over every device JAX has), `unsharded` (no mesh).
"""

import jax
import jax.numpy as jnp
from flax import nnx
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import remat_tui

LAYERS, WIDTH, SEQ, BATCH, HEADS = 4, 32, 16, 8, 2
CP = jax.checkpoint_policies
WRITTEN = CP.save_from_both_policies(CP.dots_saveable, CP.save_only_these_names("attn"))


def attention(q, k, v):
    out = jax.nn.dot_product_attention(q, k, v)
    return checkpoint_name(out, "attn")


class Block(nnx.Module):
    def __init__(self, mesh, width, dtype, *, rngs: nnx.Rngs):
        self.mesh = mesh
        typed = {"dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        self.norm = nnx.LayerNorm(width, **typed)
        self.qkv = nnx.Linear(width, 3 * width, use_bias=False, **typed)
        self.up = nnx.Linear(width, 4 * width, **typed)
        self.down = nnx.Linear(4 * width, width, **typed)

    def __call__(self, x):
        b, s, width = x.shape
        qkv = self.qkv(self.norm(x)).reshape(b, s, 3, HEADS, width // HEADS)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        if self.mesh is None:
            attn = attention(q, k, v)
        else:
            spec = P("data")
            attn = jax.shard_map(
                attention, mesh=self.mesh, in_specs=(spec, spec, spec), out_specs=spec
            )(q, k, v)
        x = x + attn.reshape(b, s, width)
        return x + self.down(nnx.gelu(self.up(x)))


class Model(nnx.Module):
    def __init__(self, mesh, width, dtype, *, rngs: nnx.Rngs):
        @nnx.split_rngs(splits=LAYERS)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def create(rngs: nnx.Rngs):
            return Block(mesh, width, dtype, rngs=rngs)

        self.blocks = create(rngs)

    def __call__(self, x, policy=WRITTEN):
        def forward(x, block):
            return block(x)

        forward = nnx.remat(forward, policy=policy)
        return nnx.scan(forward, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)(x, self.blocks)


def mesh_of(devices=None):
    devices = devices if devices is not None else jax.devices()
    # Auto axes: XLA places what the FSDP arguments leave open, as under pjit
    return jax.make_mesh((len(devices),), ("data",), axis_types=(AxisType.Auto,), devices=devices)


def _model(mesh, width, dtype):
    return nnx.eval_shape(lambda: Model(mesh, width, dtype, rngs=nnx.Rngs(0)))


def make_loss(mesh, policy=WRITTEN, width=WIDTH, dtype=jnp.float32):
    graphdef = nnx.graphdef(_model(mesh, width, dtype))

    def loss(params, x):
        return jnp.mean(nnx.merge(graphdef, params)(x, policy) ** 2)

    return loss


def example_args(mesh, batch=BATCH, seq=SEQ, width=WIDTH, dtype=jnp.float32):
    _, params = nnx.split(_model(mesh, width, dtype))
    x = jax.ShapeDtypeStruct((batch, seq, width), dtype)
    if mesh is None:
        return params, x

    def fsdp(leaf):
        # the layer axis whole, the next one split over "data"
        split = leaf.ndim >= 2 and leaf.shape[1] % mesh.size == 0
        spec = P(None, "data") if split else P()
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=NamedSharding(mesh, spec))

    params = jax.tree.map(fsdp, params)
    x = jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(mesh, P("data")))
    return params, x


sharded = remat_tui.target(
    args=lambda devices=None: example_args(mesh_of(devices)), name="sharded"
)(make_loss(mesh_of()))
unsharded = remat_tui.target(args=lambda: example_args(None), name="unsharded")(make_loss(None))
