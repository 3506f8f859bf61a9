"""A MaxText-shaped decoder, FSDP over an explicit mesh, as a remat-tui
target file (for bench_maxtext_fsdp.py).

Llama-2-7B's dimensions as MaxText's `llama2-7b` config gives them: d_model
4096, 32 heads of 128 (fused q/k/v projection), SwiGLU MLP of width 11008,
RMSNorm, rotary positions, causal attention, vocabulary 32000, bf16
parameters (about 6.7e9: 13.5 GB) and activations; 2048 tokens a sequence and
one sequence per chip. The layers are stacked and run by `jax.lax.scan` over
`jax.checkpoint(decoder_layer, policy=..., prevent_cse=False)`, as MaxText
writes `scan_layers=True`, and the layer names ten values as MaxText names
them: decoder_layer_input, qkv_proj, query_proj, key_proj, value_proj,
context, out_proj, mlpwi_0, mlpwi_1, mlpwo. The policy as written is
MaxText's `remat_policy: save_dot_except_mlpwi`.

Sharding, as MaxText's FSDP: one mesh axis `fsdp` over every chip (axis type
Explicit), every parameter split over it on its d_model (embedding) axis,
the batch split over it; each layer gathers its weights whole before using
them (`reshard` to replicated) and the gradients are reduce-scattered back
by JAX. Every input is a `jax.ShapeDtypeStruct` carrying its sharding:
nothing is allocated, remat-tui only traces and compiles.

    remat-tui compare bench/maxtext_fsdp.py:decoder --compiled --device tpu:v5p:2x2x2
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import remat_tui

LAYERS, D_MODEL, HEADS, D_HEAD, D_MLP, VOCAB = 32, 4096, 32, 128, 11008, 32000
SEQ, GLOBAL_BATCH = 2048, 8  # one sequence per chip of a v5p 2x2x2
DTYPE = jnp.bfloat16
NAMES = (
    "decoder_layer_input",
    "qkv_proj",
    "query_proj",
    "key_proj",
    "value_proj",
    "context",
    "out_proj",
    "mlpwi_0",
    "mlpwi_1",
    "mlpwo",
)
# MaxText's `remat_policy: save_dot_except_mlpwi`.
WRITTEN = jax.checkpoint_policies.save_only_these_names(
    "query_proj", "value_proj", "key_proj", "qkv_proj", "out_proj", "mlpwo"
)
# Each layer's weights, stacked over the layers; the axis split over `fsdp`
# is d_model's (MaxText's "embed" logical axis), the layer axis never.
LAYER_SHAPES = {
    "pre_attention_norm": ((D_MODEL,), P(None, "fsdp")),
    "wqkv": ((D_MODEL, 3, HEADS, D_HEAD), P(None, "fsdp")),
    "wo": ((HEADS, D_HEAD, D_MODEL), P(None, None, None, "fsdp")),
    "post_attention_norm": ((D_MODEL,), P(None, "fsdp")),
    "wi_0": ((D_MODEL, D_MLP), P(None, "fsdp")),
    "wi_1": ((D_MODEL, D_MLP), P(None, "fsdp")),
    "wo_mlp": ((D_MLP, D_MODEL), P(None, None, "fsdp")),
}


def gathered(w):
    """A layer's weight gathered whole on every chip (FSDP's all-gather)."""
    return jax.sharding.reshard(w, NamedSharding(jax.typeof(w).sharding.mesh, P()))


def rms_norm(x, scale):
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
    return (normed * scale.astype(jnp.float32)).astype(DTYPE)


def rotary(x):
    """Rotary positions over the head dim of x: [batch, seq, heads, d_head]."""
    half = D_HEAD // 2
    freqs = 1.0 / (10000.0 ** (jnp.arange(half, dtype=jnp.float32) / half))
    angles = jnp.arange(SEQ, dtype=jnp.float32)[:, None] * freqs[None, :]
    sin, cos = jnp.sin(angles)[None, :, None, :], jnp.cos(angles)[None, :, None, :]
    x1, x2 = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).astype(DTYPE)


def attention(w, x):
    qkv = checkpoint_name(jnp.einsum("bsd,dthk->bsthk", x, w["wqkv"]), "qkv_proj")
    q = checkpoint_name(rotary(qkv[:, :, 0]), "query_proj")
    k = checkpoint_name(rotary(qkv[:, :, 1]), "key_proj")
    v = checkpoint_name(qkv[:, :, 2], "value_proj")
    scores = jnp.einsum("bqhk,bshk->bhqs", q, k).astype(jnp.float32) / D_HEAD**0.5
    causal = jnp.tril(jnp.ones((SEQ, SEQ), bool))
    weights = jax.nn.softmax(jnp.where(causal, scores, -1e30), axis=-1).astype(DTYPE)
    context = checkpoint_name(jnp.einsum("bhqs,bshk->bqhk", weights, v), "context")
    return checkpoint_name(jnp.einsum("bqhk,hkd->bqd", context, w["wo"]), "out_proj")


def mlp(w, x):
    gate = checkpoint_name(x @ w["wi_0"], "mlpwi_0")
    up = checkpoint_name(x @ w["wi_1"], "mlpwi_1")
    return checkpoint_name((jax.nn.silu(gate) * up) @ w["wo_mlp"], "mlpwo")


def decoder_layer(x, w):
    w = jax.tree.map(gathered, w)
    x = checkpoint_name(x, "decoder_layer_input")
    x = x + attention(w, rms_norm(x, w["pre_attention_norm"]))
    return x + mlp(w, rms_norm(x, w["post_attention_norm"]))


def make_loss(policy=WRITTEN):
    layer = jax.checkpoint(decoder_layer, policy=policy, prevent_cse=False)

    def loss(params, tokens):
        mesh = jax.typeof(tokens).sharding.mesh
        batch_split = NamedSharding(mesh, P("fsdp", None, None))  # [batch, seq, d_model]
        x = gathered(params["embed"]).at[tokens].get(out_sharding=batch_split)
        x, _ = jax.lax.scan(lambda c, w: (layer(c, w), None), x, params["layers"])
        x = rms_norm(x, gathered(params["final_norm"]))
        logits = (x[:, :-1] @ gathered(params["lm_head"])).astype(jnp.float32)
        logp = jax.nn.log_softmax(logits, axis=-1)
        labels = tokens[:, 1:]
        return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))

    return loss


def decoder_args(devices, mesh=None, batch=GLOBAL_BATCH):
    """Parameters and tokens over `mesh` (`--mesh fsdp=N`), else a mesh of one
    Explicit axis `fsdp` over `devices`, the chosen device set's chips.
    `batch` is the global batch (what `fit` varies): a multiple of the mesh's
    size, since it is split over `fsdp` (`fit --multiple 8`)."""
    if mesh is None:
        mesh = jax.make_mesh(
            (len(devices),), ("fsdp",), axis_types=(AxisType.Explicit,), devices=devices
        )

    def spec(shape, dtype, pspec):
        return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, pspec))

    params = {
        "embed": spec((VOCAB, D_MODEL), DTYPE, P(None, "fsdp")),
        "layers": {k: spec((LAYERS, *s), DTYPE, p) for k, (s, p) in LAYER_SHAPES.items()},
        "final_norm": spec((D_MODEL,), DTYPE, P("fsdp")),
        "lm_head": spec((D_MODEL, VOCAB), DTYPE, P("fsdp", None)),
    }
    return params, spec((batch, SEQ), jnp.int32, P("fsdp", None))


decoder = remat_tui.target(args=decoder_args, name="decoder")(make_loss())
