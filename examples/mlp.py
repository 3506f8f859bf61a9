"""An MLP loss with a checkpoint_name on each layer's output: the first target
to open in remat-tui (`remat-tui examples/mlp.py`).

Try the policies: as written, every layer's tanh input and output is kept;
nothing_saveable keeps only the arguments; save_only_these_names('layer1')
keeps one layer's output and recomputes the rest.
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

import remat_tui

SIZES = (64, 128, 128, 128, 10)
BATCH = 32


def init_params():
    keys = jax.random.split(jax.random.key(0), len(SIZES) - 1)
    return [(jax.random.normal(k, (m, n)) / jnp.sqrt(m), jnp.zeros(n))
            for k, m, n in zip(keys, SIZES[:-1], SIZES[1:])]


def example_args():
    x = jnp.ones((BATCH, SIZES[0]))
    y = jnp.zeros((BATCH, SIZES[-1]))
    return init_params(), x, y


def layer(params, x):
    W, b = params
    return jnp.tanh(x @ W + b)


@remat_tui.target(args=example_args)
def loss(params, x, y):
    for i, p in enumerate(params[:-1]):
        x = checkpoint_name(layer(p, x), name=f"layer{i}")
    W, b = params[-1]
    logits = x @ W + b
    return jnp.mean((logits - y) ** 2)
