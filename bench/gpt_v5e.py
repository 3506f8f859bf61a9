"""A GPT-2-medium-shaped decoder as a remat-tui target file (for
bench_suggest_tpu.py, issue 17: `suggest --compiled` on tpu:v5e:2x2).

24 blocks, d_model 1024, 16 heads (head dim 64), MLP width 4096 (GELU),
LayerNorm, learned positions, causal attention, a vocabulary of 50304
(GPT-2's 50257 padded to a multiple of 128, as GPT-2 training code does) with
the embedding tied to the output layer; bf16 parameters (about 355e6 of them:
0.7 GB) and activations, the loss (mean next-token cross-entropy) in f32.
Every input is a jax.ShapeDtypeStruct: nothing is allocated, remat-tui only
traces and compiles.

Each block is `jax.checkpoint(block, policy=...)` under lax.scan (one
checkpoint site, as training code writes it), with checkpoint_name on four
values per block: qkv (the fused query/key/value projection, [B, S, 3D]),
attn_out (the attention's output projection), mlp_hidden (GELU output,
[B, S, 4D]) and mlp_out (the MLP's output projection).

Two targets of the same code, differing only in size:

- `gpt`: batch 32 x 1024 tokens. The code as written saves all four names;
  on one v5e chip (16 GiB HBM) that gradient does not fit, nor do the
  policies that save more, while recomputing some of the names does.
- `gpt_quick`: 4 blocks, batch 8 x 512 tokens, for a quick check of the
  benchmark (it all fits the chip; bench_suggest_tpu.py --quick gives it a
  1 GiB budget, which the code as written exceeds and recomputing fits).

    remat-tui bench/gpt_v5e.py:gpt --device tpu:v5e:2x2

Both scale: their args factory takes `batch` (the example's by default), so
`remat-tui fit bench/gpt_v5e.py:gpt --budget 16GiB --device tpu:v5e:2x2`
finds the largest batch each configuration fits (bench_fit.py).
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

import remat_tui

D_MODEL, HEADS, VOCAB = 1024, 16, 50304
D_HEAD, D_MLP = D_MODEL // HEADS, 4 * D_MODEL
DTYPE = jnp.bfloat16
LAYERS, BATCH, SEQ = 24, 32, 1024  # `gpt`
QUICK_LAYERS, QUICK_BATCH, QUICK_SEQ = 4, 8, 512  # `gpt_quick`
NAMES = ("qkv", "attn_out", "mlp_hidden", "mlp_out")
LAYER_SHAPES = {
    "ln1_scale": (D_MODEL,),
    "ln1_bias": (D_MODEL,),
    "w_qkv": (D_MODEL, 3 * D_MODEL),
    "b_qkv": (3 * D_MODEL,),
    "w_out": (D_MODEL, D_MODEL),
    "b_out": (D_MODEL,),
    "ln2_scale": (D_MODEL,),
    "ln2_bias": (D_MODEL,),
    "w_in": (D_MODEL, D_MLP),
    "b_in": (D_MLP,),
    "w_proj": (D_MLP, D_MODEL),
    "b_proj": (D_MODEL,),
}


def make_args(layers, batch, seq):
    """The args factory: shapes only, at `batch` (default the target's), so
    the target scales (`remat-tui fit`, bench_fit.py)."""

    def args(batch=batch):
        spec = jax.ShapeDtypeStruct
        params = {
            "embed": spec((VOCAB, D_MODEL), DTYPE),
            "positions": spec((seq, D_MODEL), DTYPE),
            "layers": {k: spec((layers, *s), DTYPE) for k, s in LAYER_SHAPES.items()},
            "lnf_scale": spec((D_MODEL,), DTYPE),
            "lnf_bias": spec((D_MODEL,), DTYPE),
        }
        tokens = spec((batch, seq), jnp.int32)
        return params, tokens

    return args


def layer_norm(x, scale, bias):
    x32 = x.astype(jnp.float32)
    mean = jnp.mean(x32, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x32 - mean), axis=-1, keepdims=True)
    normed = (x32 - mean) * jax.lax.rsqrt(var + 1e-5)
    return (normed * scale.astype(jnp.float32) + bias.astype(jnp.float32)).astype(x.dtype)


def attention(p, x):
    batch, seq, _ = x.shape
    qkv = checkpoint_name(x @ p["w_qkv"] + p["b_qkv"], "qkv")
    q, k, v = jnp.split(qkv.reshape(batch, seq, 3, HEADS, D_HEAD), 3, axis=2)
    q, k, v = q[:, :, 0], k[:, :, 0], v[:, :, 0]  # [batch, seq, heads, d_head]
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / jnp.sqrt(D_HEAD)
    causal = jnp.tril(jnp.ones((seq, seq), bool))
    weights = jax.nn.softmax(jnp.where(causal, scores, -1e30), axis=-1).astype(DTYPE)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, seq, D_MODEL)
    return checkpoint_name(out @ p["w_out"] + p["b_out"], "attn_out")


def mlp(p, x):
    hidden = checkpoint_name(jax.nn.gelu(x @ p["w_in"] + p["b_in"]), "mlp_hidden")
    return checkpoint_name(hidden @ p["w_proj"] + p["b_proj"], "mlp_out")


def block(p, x):
    x = x + attention(p, layer_norm(x, p["ln1_scale"], p["ln1_bias"]))
    return x + mlp(p, layer_norm(x, p["ln2_scale"], p["ln2_bias"]))


def make_gpt(policy):
    checkpointed_block = jax.checkpoint(block, policy=policy)

    def gpt(params, tokens):
        x = params["embed"][tokens] + params["positions"][None]  # [batch, seq, d_model]

        def step(x, p):
            return checkpointed_block(p, x), None

        x, _ = jax.lax.scan(step, x, params["layers"])
        x = layer_norm(x, params["lnf_scale"], params["lnf_bias"])
        logits = (x[:, :-1] @ params["embed"].T).astype(jnp.float32)  # tied embedding
        labels = tokens[:, 1:]
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))

    return gpt


AS_WRITTEN = jax.checkpoint_policies.save_only_these_names(*NAMES)

gpt = remat_tui.target(args=make_args(LAYERS, BATCH, SEQ), name="gpt")(make_gpt(AS_WRITTEN))
gpt_quick = remat_tui.target(
    args=make_args(QUICK_LAYERS, QUICK_BATCH, QUICK_SEQ), name="gpt_quick"
)(make_gpt(AS_WRITTEN))
