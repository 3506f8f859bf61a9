"""A small decoder-only transformer in Flax Linen, written the way Linen users write it.

Model: token embedding (tied with the output projection), LAYERS pre-norm
decoder blocks (LayerNorm, causal self-attention from one fused q/k/v
`nn.DenseGeneral`, LayerNorm, GELU MLP of `nn.Dense`), a final LayerNorm and
a cross-entropy loss (optax). The block is wrapped in
`nn.remat(Block, policy=...)` and stacked with `nn.scan` (parameters with a
leading LAYERS axis, `split_rngs={'params': True}`): one checkpoint site,
inside a scan of LAYERS iterations.

checkpoint_name tags: `qkv` (the fused projection), `attention_out` (the
attention output projection) and `mlp_hidden` (the GELU output).

`make_loss(policy)` builds the loss for any block policy; the registered
target `loss` uses `DEFAULT_POLICY`, a name policy that keeps the fused q/k/v
projection and recomputes the rest of the block. The target is
`loss(params, tokens, targets)` with `params` the `'params'` collection.
"""

from collections.abc import Callable

import flax.linen as nn
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
DEFAULT_POLICY = jax.checkpoint_policies.save_only_these_names("qkv")


class Block(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        h = nn.LayerNorm(name="ln1")(x)
        qkv = nn.DenseGeneral((3, HEADS, D_HEAD), use_bias=False, name="qkv")(h)
        qkv = checkpoint_name(qkv, "qkv")
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        attn = jax.nn.dot_product_attention(q, k, v, is_causal=True)
        out = nn.DenseGeneral(D_MODEL, axis=(-2, -1), use_bias=False, name="out")(attn)
        x = x + checkpoint_name(out, "attention_out")
        h = nn.LayerNorm(name="ln2")(x)
        hidden = checkpoint_name(nn.gelu(nn.Dense(D_MLP, name="mlp_in")(h)), "mlp_hidden")
        return x + nn.Dense(D_MODEL, name="mlp_out")(hidden), None


class Transformer(nn.Module):
    remat_policy: Callable[..., bool]

    @nn.compact
    def __call__(self, tokens):
        embed = nn.Embed(VOCAB, D_MODEL, name="embed")
        if self.remat_policy != NO_CHECKPOINT:
            RematBlock = nn.remat(Block, policy=self.remat_policy)
        else:
            RematBlock = Block
        Blocks = nn.scan(
            RematBlock, variable_axes={"params": 0}, split_rngs={"params": True}, length=LAYERS
        )
        x, _ = Blocks(name="blocks")(embed(tokens), None)
        return embed.attend(nn.LayerNorm(name="ln_f")(x))


def make_loss(policy: Callable[..., bool]):
    """The loss of a Transformer whose blocks are checkpointed with `policy`."""
    model = Transformer(remat_policy=policy)

    def loss(params, tokens, targets):
        logits = model.apply({"params": params}, tokens)
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    return loss


def example_args():
    """Parameters as `init` builds them from a fixed key, under jax.eval_shape:
    shapes and dtypes only (remat-tui only traces; running the initialisers
    would cost seconds of compilation)."""
    tokens = jax.ShapeDtypeStruct((BATCH, SEQ), jnp.int32)
    model = Transformer(remat_policy=DEFAULT_POLICY)
    params = jax.eval_shape(model.init, jax.random.key(0), tokens)["params"]
    return params, tokens, tokens


loss = remat_tui.target(args=example_args, name="loss")(make_loss(DEFAULT_POLICY))
