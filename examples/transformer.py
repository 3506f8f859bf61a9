"""A 24-layer decoder stack (attention + MLP), d_model 512, sequence 128.

Three targets over the same parameters: `unrolled` (a Python loop over layers,
one copy of the layer per layer in the jaxpr), `scanned` (lax.scan over
stacked layer parameters) and `scanned_checkpointed` (the scan over
`jax.checkpoint(block, policy=...)`, as real training code writes it: one
checkpoint site whose policy the app can change). Inputs are
jax.ShapeDtypeStruct, so nothing is allocated: remat-tui only traces.

checkpoint_name tags, as MaxText-style policies use them:
query_proj, key_proj, value_proj, attention_out, mlp_hidden.
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

import remat_tui

LAYERS, D_MODEL, HEADS, SEQ, BATCH = 24, 512, 8, 128, 1
D_HEAD, D_MLP = D_MODEL // HEADS, 4 * D_MODEL
LAYER_SHAPES = {
    "ln1": (D_MODEL,),
    "wq": (D_MODEL, D_MODEL),
    "wk": (D_MODEL, D_MODEL),
    "wv": (D_MODEL, D_MODEL),
    "wo": (D_MODEL, D_MODEL),
    "ln2": (D_MODEL,),
    "w_in": (D_MODEL, D_MLP),
    "w_out": (D_MLP, D_MODEL),
}


def _spec(shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def unrolled_args():
    layers = [{k: _spec(s) for k, s in LAYER_SHAPES.items()} for _ in range(LAYERS)]
    return layers, _spec((BATCH, SEQ, D_MODEL))


def scanned_args():
    stacked = {k: _spec((LAYERS, *s)) for k, s in LAYER_SHAPES.items()}
    return stacked, _spec((BATCH, SEQ, D_MODEL))


def rms_norm(x, scale):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * scale


def attention(p, x):
    def heads(t):
        return t.reshape(BATCH, SEQ, HEADS, D_HEAD)

    q = checkpoint_name(heads(x @ p["wq"]), "query_proj")
    k = checkpoint_name(heads(x @ p["wk"]), "key_proj")
    v = checkpoint_name(heads(x @ p["wv"]), "value_proj")
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(D_HEAD)
    causal = jnp.tril(jnp.ones((SEQ, SEQ), bool))
    weights = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(BATCH, SEQ, D_MODEL)
    return checkpoint_name(out @ p["wo"], "attention_out")


def mlp(p, x):
    hidden = checkpoint_name(jax.nn.gelu(x @ p["w_in"]), "mlp_hidden")
    return hidden @ p["w_out"]


def block(p, x):
    x = x + attention(p, rms_norm(x, p["ln1"]))
    return x + mlp(p, rms_norm(x, p["ln2"]))


@remat_tui.target(args=unrolled_args)
def unrolled(layers, x):
    for p in layers:
        x = block(p, x)
    return jnp.mean(x**2)


@remat_tui.target(args=scanned_args)
def scanned(stacked, x):
    def step(x, p):
        return block(p, x), None

    x, _ = jax.lax.scan(step, x, stacked)
    return jnp.mean(x**2)


def make_scanned_checkpointed(policy):
    """The scanned stack written the usual way: jax.checkpoint on the block."""
    checkpointed_block = jax.checkpoint(block, policy=policy)

    def scanned_checkpointed(stacked, x):
        def step(x, p):
            return checkpointed_block(p, x), None

        x, _ = jax.lax.scan(step, x, stacked)
        return jnp.mean(x**2)

    return scanned_checkpointed


scanned_checkpointed = remat_tui.target(args=scanned_args, name="scanned_checkpointed")(
    make_scanned_checkpointed(jax.checkpoint_policies.save_only_these_names("mlp_hidden"))
)
