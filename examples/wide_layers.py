"""Eight `tanh(x @ w)` layers over 16,384 rows: each layer's activations
(16 MiB) outweigh its weights (256 KiB), so the backward part's peak is
activations, and XLA's own rematerialization pass has forward work to
recompute when a TPU compile is given less memory than the step wants:

    remat-tui memory examples/wide_layers.py --device tpu:v5e:2x2 --memory-limit 36MiB

(docs/guide/story.md, "Did the compiler override it?").
"""

import jax
import jax.numpy as jnp

import remat_tui

ROWS, WIDTH, LAYERS = 16384, 256, 8


def example_args():
    """Shapes only: nothing is allocated."""
    f32 = jnp.float32
    return (
        jax.ShapeDtypeStruct((ROWS, WIDTH), f32),
        [jax.ShapeDtypeStruct((WIDTH, WIDTH), f32)] * LAYERS,
    )


@remat_tui.target(args=example_args)
def loss(x, ws):
    for w in ws:
        x = jnp.tanh(x @ w)
    return x.sum()
