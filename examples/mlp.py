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


def example_args(batch=BATCH):
    """Shapes only (nothing is allocated or computed: remat-tui traces, never
    runs the function), exactly the residuals real arrays would give. It takes
    the batch, so the target scales: remat-tui fit examples/mlp.py --budget
    1MiB finds the largest batch each policy fits (the default: the example)."""

    def f32(*shape):
        return jax.ShapeDtypeStruct(shape, jnp.float32)

    params = [(f32(m, n), f32(n)) for m, n in zip(SIZES[:-1], SIZES[1:], strict=True)]
    return params, f32(batch, SIZES[0]), f32(batch, SIZES[-1])


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
