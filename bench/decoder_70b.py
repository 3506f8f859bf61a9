"""A Llama-70B-shaped decoder as a remat-tui target file (for bench_70b.py).

80 layers, d_model 8192, grouped-query attention (64 query heads, 8 key/value
heads, head dim 128, rotary positions, causal), a SwiGLU MLP of width 28672,
RMSNorm, vocabulary 128256, bf16 parameters (about 70.6e9 of them: 141 GB) and
a batch of 1 x 2048 tokens, every input a jax.ShapeDtypeStruct: nothing is
allocated, remat-tui only traces and compiles.

One target, `decoder`: lax.scan over `jax.checkpoint(block, policy=...)` (one
checkpoint site, as training code writes it), with checkpoint_name on
query_proj, key_proj, value_proj, attention_out and mlp_hidden; the loss is
the mean cross-entropy of the next token, in f32.

    remat-tui bench/decoder_70b.py:decoder
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

import remat_tui

LAYERS, D_MODEL, Q_HEADS, KV_HEADS, D_HEAD = 80, 8192, 64, 8, 128
D_MLP, VOCAB, BATCH, SEQ = 28672, 128256, 1, 2048
DTYPE = jnp.bfloat16
LAYER_SHAPES = {
    "attn_norm": (D_MODEL,),
    "wq": (D_MODEL, Q_HEADS * D_HEAD),
    "wk": (D_MODEL, KV_HEADS * D_HEAD),
    "wv": (D_MODEL, KV_HEADS * D_HEAD),
    "wo": (Q_HEADS * D_HEAD, D_MODEL),
    "mlp_norm": (D_MODEL,),
    "w_gate": (D_MODEL, D_MLP),
    "w_up": (D_MODEL, D_MLP),
    "w_down": (D_MLP, D_MODEL),
}


def decoder_args():
    spec = jax.ShapeDtypeStruct
    params = {
        "embed": spec((VOCAB, D_MODEL), DTYPE),
        "layers": {k: spec((LAYERS, *s), DTYPE) for k, s in LAYER_SHAPES.items()},
        "final_norm": spec((D_MODEL,), DTYPE),
        "lm_head": spec((D_MODEL, VOCAB), DTYPE),
    }
    tokens = spec((BATCH, SEQ), jnp.int32)
    return params, tokens


def rms_norm(x, scale):
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-5)
    return (normed * scale.astype(jnp.float32)).astype(x.dtype)


def rotary(x, positions):
    """Rotary position embedding over the last axis (head dim), base 500000."""
    half = D_HEAD // 2
    freqs = 1.0 / (500000.0 ** (jnp.arange(half, dtype=jnp.float32) / half))
    angles = positions[:, None].astype(jnp.float32) * freqs[None, :]  # [seq, half]
    sin, cos = jnp.sin(angles)[None, :, None, :], jnp.cos(angles)[None, :, None, :]
    x1, x2 = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).astype(x.dtype)


def attention(p, x):
    positions = jnp.arange(SEQ)
    q = x @ p["wq"]
    k = x @ p["wk"]
    v = x @ p["wv"]
    q = checkpoint_name(q.reshape(BATCH, SEQ, Q_HEADS, D_HEAD), "query_proj")
    k = checkpoint_name(k.reshape(BATCH, SEQ, KV_HEADS, D_HEAD), "key_proj")
    v = checkpoint_name(v.reshape(BATCH, SEQ, KV_HEADS, D_HEAD), "value_proj")
    q, k = rotary(q, positions), rotary(k, positions)
    group = Q_HEADS // KV_HEADS
    q = q.reshape(BATCH, SEQ, KV_HEADS, group, D_HEAD)
    scores = jnp.einsum("bqkgd,bskd->bkgqs", q, k).astype(jnp.float32) / jnp.sqrt(D_HEAD)
    causal = jnp.tril(jnp.ones((SEQ, SEQ), bool))
    weights = jax.nn.softmax(jnp.where(causal, scores, -1e30), axis=-1).astype(DTYPE)
    out = jnp.einsum("bkgqs,bskd->bqkgd", weights, v).reshape(BATCH, SEQ, Q_HEADS * D_HEAD)
    return checkpoint_name(out @ p["wo"], "attention_out")


def mlp(p, x):
    hidden = jax.nn.silu(x @ p["w_gate"]) * (x @ p["w_up"])
    return checkpoint_name(hidden, "mlp_hidden") @ p["w_down"]


def block(p, x):
    x = x + attention(p, rms_norm(x, p["attn_norm"]))
    return x + mlp(p, rms_norm(x, p["mlp_norm"]))


def make_decoder(policy):
    checkpointed_block = jax.checkpoint(block, policy=policy)

    def decoder(params, tokens):
        x = params["embed"][tokens]  # [batch, seq, d_model]

        def step(x, p):
            return checkpointed_block(p, x), None

        x, _ = jax.lax.scan(step, x, params["layers"])
        x = rms_norm(x, params["final_norm"])
        logits = (x[:, :-1] @ params["lm_head"]).astype(jnp.float32)
        labels = tokens[:, 1:]
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))

    return decoder


decoder = remat_tui.target(args=decoder_args, name="decoder")(
    make_decoder(jax.checkpoint_policies.save_only_these_names("mlp_hidden", "attention_out"))
)


def decoder_fsdp_args(devices):
    """The same arguments, parameters sharded over `devices` (fully sharded
    data parallel: each parameter split along its first axis the devices
    divide, the layer axis aside), tokens replicated: what a 70B model needs
    to fit a slice of chips at all."""
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    # Automatic sharding: XLA places the activations, as FSDP training code lets it.
    mesh = jax.make_mesh((len(devices),), ("fsdp",), devices=devices, axis_types=(AxisType.Auto,))
    n = len(devices)

    def sharded(x, skip=0):
        axes = [None] * len(x.shape)
        for i in range(skip, len(x.shape)):
            if x.shape[i] % n == 0:
                axes[i] = "fsdp"
                break
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(mesh, P(*axes)))

    params, tokens = decoder_args()
    params = {
        "embed": sharded(params["embed"]),
        "layers": {k: sharded(v, skip=1) for k, v in params["layers"].items()},
        "final_norm": sharded(params["final_norm"]),
        "lm_head": sharded(params["lm_head"]),
    }
    replicated = NamedSharding(mesh, P())
    return params, jax.ShapeDtypeStruct(tokens.shape, tokens.dtype, sharding=replicated)


decoder_fsdp = remat_tui.target(args=decoder_fsdp_args, name="decoder_fsdp")(
    make_decoder(jax.checkpoint_policies.save_only_these_names("mlp_hidden", "attention_out"))
)
