"""A small decoder-only transformer in Flax NNX, written the way NNX users write it.

Model: token embedding (tied with the output projection), LAYERS pre-norm
decoder blocks (LayerNorm, causal self-attention from one fused q/k/v
projection, LayerNorm, GELU MLP), a final LayerNorm and a cross-entropy loss
(optax). The blocks are created with `nnx.split_rngs` + `nnx.vmap` (one
stacked set of block parameters) and applied with `nnx.scan` over a block
wrapped in `nnx.remat(policy=...)`: one checkpoint site, inside a scan of
LAYERS iterations.

checkpoint_name tags: `qkv` (the fused projection, before the head split),
`attention_out` (the attention output projection) and `mlp_hidden` (the GELU
output).

`make_loss(policy)` builds the loss for any block policy; the registered
target `loss` uses `DEFAULT_POLICY` (nothing_saveable, the usual "recompute
the whole block" choice). The model is split with `nnx.split`: the graphdef
is closed over and the parameters are passed as an `nnx.State`, so the target
is a pure function of arrays, `loss(params, tokens, targets)`.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.ad_checkpoint import checkpoint_name

import remat_tui

# make_loss(NO_CHECKPOINT): the same model with the block's checkpoint deleted.
NO_CHECKPOINT = "no checkpoint"

LAYERS, D_MODEL, HEADS, SEQ, BATCH, VOCAB = 2, 32, 4, 16, 2, 64
D_HEAD, D_MLP = D_MODEL // HEADS, 4 * D_MODEL
NAMES = ("qkv", "attention_out", "mlp_hidden")
DEFAULT_POLICY = jax.checkpoint_policies.nothing_saveable


class Block(nnx.Module):
    def __init__(self, *, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(D_MODEL, rngs=rngs)
        self.qkv = nnx.Linear(D_MODEL, 3 * D_MODEL, use_bias=False, rngs=rngs)
        self.out = nnx.Linear(D_MODEL, D_MODEL, use_bias=False, rngs=rngs)
        self.ln2 = nnx.LayerNorm(D_MODEL, rngs=rngs)
        self.mlp_in = nnx.Linear(D_MODEL, D_MLP, rngs=rngs)
        self.mlp_out = nnx.Linear(D_MLP, D_MODEL, rngs=rngs)

    def __call__(self, x):
        batch, seq, _ = x.shape
        qkv = checkpoint_name(self.qkv(self.ln1(x)), "qkv")
        q, k, v = jnp.split(qkv.reshape(batch, seq, 3 * HEADS, D_HEAD), 3, axis=2)
        attn = jax.nn.dot_product_attention(q, k, v, is_causal=True)
        x = x + checkpoint_name(self.out(attn.reshape(batch, seq, D_MODEL)), "attention_out")
        hidden = checkpoint_name(nnx.gelu(self.mlp_in(self.ln2(x))), "mlp_hidden")
        return x + self.mlp_out(hidden)


class Transformer(nnx.Module):
    def __init__(self, remat_policy: Callable[..., bool], *, rngs: nnx.Rngs):
        self.remat_policy = remat_policy
        self.embed = nnx.Embed(VOCAB, D_MODEL, rngs=rngs)

        @nnx.split_rngs(splits=LAYERS)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def create_blocks(rngs: nnx.Rngs):
            return Block(rngs=rngs)

        self.blocks = create_blocks(rngs)
        self.ln_f = nnx.LayerNorm(D_MODEL, rngs=rngs)

    def __call__(self, tokens):
        def forward(x, block: Block):
            return block(x)

        if self.remat_policy != NO_CHECKPOINT:
            forward = nnx.remat(forward, policy=self.remat_policy)
        forward = nnx.scan(forward, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        x = forward(self.embed(tokens), self.blocks)
        return self.embed.attend(self.ln_f(x))


def make_loss(policy: Callable[..., bool]):
    """The loss of a Transformer whose blocks are checkpointed with `policy`."""
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: Transformer(policy, rngs=nnx.Rngs(0))))

    def loss(params, tokens, targets):
        model = nnx.merge(graphdef, params)
        logits = model(tokens)
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    return loss


def example_args():
    """Parameters as nnx.eval_shape builds them from a fixed key: shapes and
    dtypes only (jax.ShapeDtypeStruct leaves), since remat-tui only traces and
    running the initialisers eagerly would cost seconds of compilation."""
    _, params = nnx.split(nnx.eval_shape(lambda: Transformer(DEFAULT_POLICY, rngs=nnx.Rngs(0))))
    tokens = jax.ShapeDtypeStruct((BATCH, SEQ), jnp.int32)
    return params, tokens, tokens


loss = remat_tui.target(args=example_args, name="loss")(make_loss(DEFAULT_POLICY))
