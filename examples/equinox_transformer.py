"""A small decoder-only transformer in Equinox, written the way Equinox users write it.

Model: token embedding, LAYERS pre-norm decoder blocks (LayerNorm, causal
self-attention from one fused q/k/v `eqx.nn.Linear`, LayerNorm, GELU MLP), a
final LayerNorm, an unembedding `eqx.nn.Linear` and a cross-entropy loss
(optax). Layers act on one example, as Equinox layers do, and are
`jax.vmap`ped over positions and the batch.

The blocks are built with `eqx.filter_vmap` over LAYERS keys (one Block whose
arrays have a leading LAYERS axis), split with `eqx.partition` into arrays
and static structure, and run with `jax.lax.scan` over the arrays; the scan
body is `eqx.filter_checkpoint(policy=...)` around `eqx.combine` + the block:
one checkpoint site, inside a scan of LAYERS iterations.

checkpoint_name tags: `qkv` (the fused projection), `attention_out` (the
attention output projection) and `mlp_hidden` (the GELU output).

`make_loss(policy)` builds the loss for any block policy; the registered
target `loss` uses `DEFAULT_POLICY`, dots_with_no_batch_dims_saveable (keep
the weight matmuls, recompute the rest). The target is
`loss(model, tokens, targets)`: the model is the pytree of parameters, as in
`eqx.filter_grad`.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jax.ad_checkpoint import checkpoint_name

import remat_tui

# make_loss(NO_CHECKPOINT): the same model with the block's checkpoint deleted.
NO_CHECKPOINT = "no checkpoint"

LAYERS, D_MODEL, HEADS, SEQ, BATCH, VOCAB = 2, 32, 4, 16, 2, 64
D_HEAD, D_MLP = D_MODEL // HEADS, 4 * D_MODEL
NAMES = ("qkv", "attention_out", "mlp_hidden")
DEFAULT_POLICY = jax.checkpoint_policies.dots_with_no_batch_dims_saveable


class Block(eqx.Module):
    ln1: eqx.nn.LayerNorm
    qkv: eqx.nn.Linear
    out: eqx.nn.Linear
    ln2: eqx.nn.LayerNorm
    mlp_in: eqx.nn.Linear
    mlp_out: eqx.nn.Linear

    def __init__(self, key):
        k_qkv, k_out, k_in, k_mlp_out = jax.random.split(key, 4)
        self.ln1 = eqx.nn.LayerNorm(D_MODEL)
        self.qkv = eqx.nn.Linear(D_MODEL, 3 * D_MODEL, use_bias=False, key=k_qkv)
        self.out = eqx.nn.Linear(D_MODEL, D_MODEL, use_bias=False, key=k_out)
        self.ln2 = eqx.nn.LayerNorm(D_MODEL)
        self.mlp_in = eqx.nn.Linear(D_MODEL, D_MLP, key=k_in)
        self.mlp_out = eqx.nn.Linear(D_MLP, D_MODEL, key=k_mlp_out)

    def __call__(self, x):  # x: [SEQ, D_MODEL]
        qkv = checkpoint_name(jax.vmap(self.qkv)(jax.vmap(self.ln1)(x)), "qkv")
        q, k, v = jnp.split(qkv.reshape(SEQ, 3 * HEADS, D_HEAD), 3, axis=1)
        attn = jax.nn.dot_product_attention(q, k, v, is_causal=True)
        x = x + checkpoint_name(jax.vmap(self.out)(attn.reshape(SEQ, D_MODEL)), "attention_out")
        h = jax.vmap(self.ln2)(x)
        hidden = checkpoint_name(jax.nn.gelu(jax.vmap(self.mlp_in)(h)), "mlp_hidden")
        return x + jax.vmap(self.mlp_out)(hidden)


class Transformer(eqx.Module):
    embed: eqx.nn.Embedding
    blocks: Block  # every array has a leading LAYERS axis
    ln_f: eqx.nn.LayerNorm
    unembed: eqx.nn.Linear

    def __init__(self, key):
        k_embed, k_blocks, k_unembed = jax.random.split(key, 3)
        self.embed = eqx.nn.Embedding(VOCAB, D_MODEL, key=k_embed)
        self.blocks = eqx.filter_vmap(Block)(jax.random.split(k_blocks, LAYERS))
        self.ln_f = eqx.nn.LayerNorm(D_MODEL)
        self.unembed = eqx.nn.Linear(D_MODEL, VOCAB, use_bias=False, key=k_unembed)

    def __call__(self, tokens, remat_policy: Callable[..., bool]):  # tokens: [SEQ]
        dynamic, static = eqx.partition(self.blocks, eqx.is_array)

        def step(x, block_arrays):
            block = eqx.combine(block_arrays, static)
            return block(x), None

        if remat_policy != NO_CHECKPOINT:
            step = eqx.filter_checkpoint(step, policy=remat_policy)

        x, _ = jax.lax.scan(step, jax.vmap(self.embed)(tokens), dynamic)
        return jax.vmap(self.unembed)(jax.vmap(self.ln_f)(x))


def make_loss(policy: Callable[..., bool]):
    """The loss of a Transformer whose blocks are checkpointed with `policy`."""

    def loss(model, tokens, targets):
        logits = jax.vmap(lambda t: model(t, remat_policy=policy))(tokens)
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    return loss


def example_args():
    """The model as eqx.filter_eval_shape builds it from a fixed key: shapes and
    dtypes only (remat-tui only traces; running the initialisers would cost
    seconds of compilation)."""
    model = eqx.filter_eval_shape(Transformer, jax.random.key(0))
    tokens = jax.ShapeDtypeStruct((BATCH, SEQ), jnp.int32)
    return model, tokens, tokens


loss = remat_tui.target(args=example_args, name="loss")(make_loss(DEFAULT_POLICY))
