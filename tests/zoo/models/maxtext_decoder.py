"""Zoo: a MaxText-style decoder: a `jax.lax.scan` over stacked layers whose
body is `jax.checkpoint(decoder_layer, policy=...)`, the layer naming ten
values as MaxText names them (decoder_layer_input, qkv_proj, query_proj,
key_proj, value_proj, attn_scores, context, out_proj, mlpwi, mlpwo), under a
names policy. One head, no mask: the names matter here, not attention's
details, and every op costs compile time in each of the tier's compiles.

`make_loss(policy)`: the same decoder with the layer's checkpoint given
`policy` (NO_CHECKPOINT: the layer scanned without it). The registered
target `loss` uses `WRITTEN`, `save_only_these_names('out_proj', 'mlpwo')`.
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

import remat_tui

LAYERS, WIDTH, SEQ, BATCH, MLP = 3, 16, 8, 2, 32
NO_CHECKPOINT = "no checkpoint"
WRITTEN = jax.checkpoint_policies.save_only_these_names("out_proj", "mlpwo")


def rms_norm(x):
    return x * jax.lax.rsqrt(jnp.mean(x**2, axis=-1, keepdims=True) + 1e-6)


def decoder_layer(x, w):
    x = checkpoint_name(x, "decoder_layer_input")
    qkv = checkpoint_name(rms_norm(x) @ w["wqkv"], "qkv_proj")
    q = checkpoint_name(qkv[..., :WIDTH], "query_proj")
    k = checkpoint_name(qkv[..., WIDTH : 2 * WIDTH], "key_proj")
    v = checkpoint_name(qkv[..., 2 * WIDTH :], "value_proj")
    scores = checkpoint_name(jnp.einsum("bqd,bkd->bqk", q, k) / WIDTH**0.5, "attn_scores")
    context = checkpoint_name(jax.nn.softmax(scores, axis=-1) @ v, "context")
    x = x + checkpoint_name(context @ w["wo"], "out_proj")
    wi = checkpoint_name(jax.nn.silu(x @ w["wi"]), "mlpwi")
    return x + checkpoint_name(wi @ w["wout"], "mlpwo")


def make_loss(policy=WRITTEN):
    if policy == NO_CHECKPOINT:
        layer = decoder_layer
    else:
        layer = jax.checkpoint(decoder_layer, policy=policy)

    def loss(params, x):
        y, _ = jax.lax.scan(lambda c, w: (layer(c, w), None), x, params)
        return jnp.mean(rms_norm(y) ** 2)

    return loss


def example_args(batch=BATCH):
    def f32(*shape):
        return jax.ShapeDtypeStruct((LAYERS, *shape), jnp.float32)

    params = {
        "wqkv": f32(WIDTH, 3 * WIDTH),
        "wo": f32(WIDTH, WIDTH),
        "wi": f32(WIDTH, MLP),
        "wout": f32(MLP, WIDTH),
    }
    return params, jax.ShapeDtypeStruct((batch, SEQ, WIDTH), jnp.float32)


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
