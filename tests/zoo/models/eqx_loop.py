"""Zoo: an Equinox model whose layers run in a Python loop, each under
`eqx.filter_checkpoint(layer, policy=...)`, with no `checkpoint_name` (the
shape of an Equinox Llama). The layers' arrays are the argument (the
`eqx.partition` of the layers: a pytree of arrays), their static part
closed over.

`make_loss(policy_of)`: the same model with `policy_of(i)` the policy of
layer i's `eqx.filter_checkpoint` (NO_CHECKPOINT: the layer called
directly). The registered target `loss` uses `WRITTEN`,
`dots_with_no_batch_dims_saveable` at every layer.
"""

import equinox as eqx
import jax
import jax.numpy as jnp

import remat_tui

LAYERS, WIDTH, BATCH = 3, 16, 4
NO_CHECKPOINT = "no checkpoint"


def WRITTEN(i):
    return jax.checkpoint_policies.dots_with_no_batch_dims_saveable


class Layer(eqx.Module):
    up: eqx.nn.Linear
    down: eqx.nn.Linear

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.up = eqx.nn.Linear(WIDTH, 2 * WIDTH, key=k1)
        self.down = eqx.nn.Linear(2 * WIDTH, WIDTH, key=k2)

    def __call__(self, x):  # x: [BATCH, WIDTH]
        return x + jax.vmap(self.down)(jax.nn.silu(jax.vmap(self.up)(x)))


def _layers():
    return eqx.filter_eval_shape(
        lambda: [Layer(k) for k in jax.random.split(jax.random.key(0), LAYERS)]
    )


def _is_array(leaf):
    """Arrays, and their shapes where the layers were built abstractly."""
    return eqx.is_array(leaf) or isinstance(leaf, jax.ShapeDtypeStruct)


STATIC = eqx.partition(_layers(), _is_array)[1]


def make_loss(policy_of=WRITTEN):
    def loss(arrays, x):
        for i, layer in enumerate(eqx.combine(arrays, STATIC)):
            if policy_of(i) == NO_CHECKPOINT:
                x = layer(x)
            else:
                x = eqx.filter_checkpoint(layer, policy=policy_of(i))(x)
        return jnp.mean(x**2)

    return loss


def example_args(batch=BATCH):
    arrays = eqx.partition(_layers(), _is_array)[0]
    return arrays, jax.ShapeDtypeStruct((batch, WIDTH), jnp.float32)


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
