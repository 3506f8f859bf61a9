"""A small Equinox Llama-shaped decoder (issue 41, item 15): an embedding
lookup (a gather), layers run in a Python loop under
`eqx.filter_checkpoint(layer, policy=...)`, RMS norms, softmax attention
and a `log_softmax` cross-entropy; no names. The target differentiates the
model's arrays (`eqx.partition`), its static structure is closed over.

`make_loss(policy)` builds the loss with every layer under that policy."""

import equinox as eqx
import jax
import jax.numpy as jnp

import remat_tui

CP = jax.checkpoint_policies
LAYERS, SEQ, WIDTH, VOCAB = 2, 8, 16, 64


class Layer(eqx.Module):
    qkv: eqx.nn.Linear
    out: eqx.nn.Linear
    up: eqx.nn.Linear
    down: eqx.nn.Linear

    def __init__(self, key):
        k1, k2, k3, k4 = jax.random.split(key, 4)
        self.qkv = eqx.nn.Linear(WIDTH, 3 * WIDTH, use_bias=False, key=k1)
        self.out = eqx.nn.Linear(WIDTH, WIDTH, use_bias=False, key=k2)
        self.up = eqx.nn.Linear(WIDTH, 4 * WIDTH, use_bias=False, key=k3)
        self.down = eqx.nn.Linear(4 * WIDTH, WIDTH, use_bias=False, key=k4)

    def __call__(self, x):  # x: [SEQ, WIDTH]
        h = x * jax.lax.rsqrt(jnp.mean(x**2, axis=-1, keepdims=True) + 1e-6)
        q, k, v = jnp.split(jax.vmap(self.qkv)(h), 3, axis=-1)
        weights = jax.nn.softmax(q @ k.T / jnp.sqrt(WIDTH), axis=-1)
        x = x + jax.vmap(self.out)(weights @ v)
        return x + jax.vmap(self.down)(jax.nn.silu(jax.vmap(self.up)(x)))


class Llama(eqx.Module):
    embed: eqx.nn.Embedding
    layers: list
    head: eqx.nn.Linear

    def __init__(self, key):
        keys = jax.random.split(key, LAYERS + 2)
        self.embed = eqx.nn.Embedding(VOCAB, WIDTH, key=keys[0])
        self.layers = [Layer(k) for k in keys[1:-1]]
        self.head = eqx.nn.Linear(WIDTH, VOCAB, use_bias=False, key=keys[-1])

    def __call__(self, tokens, policy):
        x = jax.vmap(self.embed)(tokens)
        for layer in self.layers:
            x = eqx.filter_checkpoint(layer, policy=policy)(x)
        return jax.vmap(self.head)(x)


def _static():
    """(the arrays' shapes, the static rest) of the model eqx.filter_eval_shape builds."""
    shapes = eqx.filter_eval_shape(Llama, jax.random.key(0))
    return eqx.partition(shapes, lambda leaf: isinstance(leaf, jax.ShapeDtypeStruct))


def make_loss(policy=None):
    _, static = _static()

    def loss(params, tokens, targets):
        model = eqx.combine(params, static)
        logits = model(tokens, policy)
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, targets[:, None], axis=-1))

    return loss


def example_args():
    params, _ = _static()
    tokens = jax.ShapeDtypeStruct((SEQ,), jnp.int32)
    return params, tokens, tokens


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
