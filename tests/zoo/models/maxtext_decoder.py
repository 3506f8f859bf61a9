"""Zoo: a MaxText-style decoder: a `jax.lax.scan` over stacked layers whose
body is `jax.checkpoint(decoder_layer, policy=...)`, the layer naming ten
values as MaxText names them (decoder_layer_input, query_proj, key_proj,
value_proj, qkv, attn_scores, context, out_proj, mlpwi, mlpwo), under a
names policy.

`make_loss(policy)`: the same decoder with the layer's checkpoint given
`policy` (NO_CHECKPOINT: the layer scanned without it). The registered
target `loss` uses `WRITTEN`, `save_only_these_names('out_proj', 'mlpwo')`.
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

import remat_tui

LAYERS, WIDTH, HEADS, SEQ, BATCH, MLP = 3, 16, 2, 8, 2, 32
HEAD = WIDTH // HEADS
NO_CHECKPOINT = "no checkpoint"
WRITTEN = jax.checkpoint_policies.save_only_these_names("out_proj", "mlpwo")


def rms_norm(x):
    return x * jax.lax.rsqrt(jnp.mean(x**2, axis=-1, keepdims=True) + 1e-6)


def decoder_layer(x, w):
    x = checkpoint_name(x, "decoder_layer_input")
    h = rms_norm(x)
    q = checkpoint_name(jnp.einsum("bsd,dhk->bshk", h, w["wq"]), "query_proj")
    k = checkpoint_name(jnp.einsum("bsd,dhk->bshk", h, w["wk"]), "key_proj")
    v = checkpoint_name(jnp.einsum("bsd,dhk->bshk", h, w["wv"]), "value_proj")
    qkv = checkpoint_name(jnp.stack([q, k, v]), "qkv")
    q, k, v = qkv[0], qkv[1], qkv[2]
    scores = checkpoint_name(jnp.einsum("bqhk,bshk->bhqs", q, k) / HEAD**0.5, "attn_scores")
    causal = jnp.tril(jnp.ones((SEQ, SEQ), bool))
    probs = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1)
    context = checkpoint_name(jnp.einsum("bhqs,bshk->bqhk", probs, v), "context")
    x = x + checkpoint_name(jnp.einsum("bshk,hkd->bsd", context, w["wo"]), "out_proj")
    wi = checkpoint_name(jax.nn.silu(rms_norm(x) @ w["wi"]), "mlpwi")
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
        "wq": f32(WIDTH, HEADS, HEAD),
        "wk": f32(WIDTH, HEADS, HEAD),
        "wv": f32(WIDTH, HEADS, HEAD),
        "wo": f32(HEADS, HEAD, WIDTH),
        "wi": f32(WIDTH, MLP),
        "wout": f32(MLP, WIDTH),
    }
    return params, jax.ShapeDtypeStruct((batch, SEQ, WIDTH), jnp.float32)


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
