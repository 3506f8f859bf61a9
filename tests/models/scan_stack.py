"""A stack of small residual layers in one `jax.lax.scan`, for the structure
tests (issue 32): each layer `x + tanh(x @ w + b)`, its parameters stacked on
a leading layer axis (the scan's xs, a dict), its carry a [BATCH, WIDTH]
activation, and a per-layer mean stacked as the scan's ys (so rebuilt scans
must put ys back in order). The batch is wide and the weights small, so the
carries a scan keeps are what fills memory, as in the stacks nested scans
are for.

`make_stack(policy, layers)` builds the loss with each layer under
`jax.checkpoint(layer, policy=policy)` (None: no checkpoint): the oracle of
a structure is the same layer and loss with the scan rewritten by hand
(tests/unit/test_structures.py)."""

import jax
import jax.numpy as jnp

import remat_tui

CP = jax.checkpoint_policies
LAYERS, BATCH, WIDTH = 16, 512, 32


def layer(x, p):
    h = jnp.tanh(x @ p["w"] + p["b"])
    return x + h, jnp.mean(h)


def loss_of(x, means):
    """The loss from the scan's final carry and its stacked per-layer means."""
    return jnp.mean(x**2) + jnp.mean(means)


def make_stack(policy=CP.nothing_saveable, layers=LAYERS):
    step = layer if policy is None else jax.checkpoint(layer, policy=policy)

    def stack(params, x):
        x, means = jax.lax.scan(step, x, params)
        return loss_of(x, means)

    return stack


def make_args(layers=LAYERS):
    def args():
        params = {
            "w": jax.ShapeDtypeStruct((layers, WIDTH, WIDTH), jnp.float32),
            "b": jax.ShapeDtypeStruct((layers, WIDTH), jnp.float32),
        }
        return params, jax.ShapeDtypeStruct((BATCH, WIDTH), jnp.float32)

    return args


stack = remat_tui.target(args=make_args(), name="stack")(make_stack())
