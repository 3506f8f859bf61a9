"""A Flax Linen decoder shaped as nanodo writes it (issue 41, items 6): a
Python list of `nn.remat(Block)` blocks, each a pre-norm attention and MLP
with residual adds, no `checkpoint_name`, then a vocabulary projection and
a `log_softmax` cross-entropy. Tiny sizes; the vocabulary is the widest
axis, as in a language model, so the loss's `exp` is the largest value.

`make_loss(policy)` builds the loss with every block under that policy."""

import flax.linen as nn
import jax
import jax.numpy as jnp

import remat_tui

CP = jax.checkpoint_policies
BLOCKS, BATCH, SEQ, WIDTH, HEADS, VOCAB = 3, 2, 16, 32, 2, 256


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.LayerNorm()(x)
        b, t, d = h.shape
        qkv = nn.Dense(3 * d, use_bias=False)(h).reshape(b, t, 3, HEADS, d // HEADS)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        scores = jnp.einsum("bthd,bshd->bhts", q, k) / jnp.sqrt(d // HEADS)
        causal = jnp.tril(jnp.ones((t, t), bool))
        scores = jnp.where(causal, scores, -1e9)
        attn = jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(scores), v)
        x = x + nn.Dense(d, use_bias=False)(attn.reshape(b, t, d))
        h = nn.LayerNorm()(x)
        h = nn.Dense(4 * d, use_bias=False)(h)
        return x + nn.Dense(d, use_bias=False)(jax.nn.gelu(h))


class Decoder(nn.Module):
    policy: object = None

    @nn.compact
    def __call__(self, tokens):
        x = nn.Embed(VOCAB, WIDTH)(tokens)
        blocks = [nn.remat(Block, policy=self.policy)() for _ in range(BLOCKS)]
        for block in blocks:
            x = block(x)
        x = nn.LayerNorm()(x)
        return nn.Dense(VOCAB, use_bias=False)(x)


def cross_entropy(logits, targets):
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))


def make_loss(policy=None):
    model = Decoder(policy=policy)

    def loss(params, tokens, targets):
        return cross_entropy(model.apply({"params": params}, tokens), targets)

    return loss


def example_args():
    tokens = jax.ShapeDtypeStruct((BATCH, SEQ), jnp.int32)
    params = jax.eval_shape(Decoder().init, jax.random.key(0), tokens)["params"]
    return params, tokens, tokens


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
