"""A test model for `verify`'s bisection at a checkpoint site (issue 43):
eight layers in one checkpointed block (`block`, the site), each
pre-activation named (`h1` ... `h8`), the block's policy a names policy
that, as written, saves all eight. One layer (NOISY, `h5`) adds noise drawn
through a `jax.pure_callback` over Python state, as
tests/models/eight_names.py does: the first draw of a step adds 0, every
later one NOISE more. A policy at the site that recomputes `h5` runs that
callback again in the backward pass and moves the gradients; recomputing any
other name recomputes it from the saved names around it.

A second callback (`_shift`, over Python state of its own) runs outside the
block, on its output: no policy at the site recomputes it, so it is never
the reason the gradients move.

`loss_under(policy)`: the loss with the block under
`jax.checkpoint(policy=policy)`, the oracle's factory; the registered
target, `loss`, is the code as written (`WRITTEN`: every name saved).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name

import remat_tui

WIDTH, BATCH = 8, 4
NAMES = tuple(f"h{i}" for i in range(1, 9))
NOISY = "h5"
NOISE = 0.1
draws = [0]  # the Python state: the noise's draws since the step began
shifts = [0]  # the second callback's own state: its calls since the step began


def _draw(z):
    k = draws[0]
    draws[0] += 1
    return np.full(z.shape, NOISE * k, dtype=z.dtype)


def noise(z):
    z = jax.lax.stop_gradient(z)  # drawn, not differentiated
    return jax.pure_callback(_draw, jax.ShapeDtypeStruct(z.shape, z.dtype), z)


def _shift_draw(h):
    k = shifts[0]
    shifts[0] += 1
    return np.full(h.shape, NOISE * (k + 1), dtype=h.dtype)


def shift(h):
    h0 = jax.lax.stop_gradient(h)
    return jax.pure_callback(_shift_draw, jax.ShapeDtypeStruct(h0.shape, h0.dtype), h0)


@jax.custom_vjp
def _step_ends(params):
    return params


def _step_ends_fwd(params):
    return params, None


def _step_ends_bwd(_, grads):
    # After every gradient is computed: the next step draws from 0 again.
    def reset(grads):
        draws[0] = 0
        shifts[0] = 0
        return grads

    shapes = jax.tree.map(lambda g: jax.ShapeDtypeStruct(g.shape, g.dtype), grads)
    return (jax.pure_callback(reset, shapes, grads),)


_step_ends.defvjp(_step_ends_fwd, _step_ends_bwd)


def block(params, h):
    for i, name in enumerate(NAMES):
        z = h @ params[f"W{i + 1}"]
        if name == NOISY:
            z = z + noise(z)
        h = jnp.tanh(checkpoint_name(z, name))
    return h


def loss_under(policy):
    """The loss with its block under `jax.checkpoint(policy=policy)`."""
    checkpointed = jax.checkpoint(block, policy=policy)

    def loss(params, x):
        params = _step_ends(params)
        h = checkpointed(params, x)
        return jnp.mean((h + shift(h)) ** 2)

    return loss


WRITTEN = jax.checkpoint_policies.save_only_these_names(*NAMES)


def example_args():
    keys = jax.random.split(jax.random.key(0), len(NAMES) + 1)
    params = {
        f"W{i + 1}": 1.5 * jax.random.normal(keys[i], (WIDTH, WIDTH)) / WIDTH**0.5
        for i in range(len(NAMES))
    }
    return params, jax.random.normal(keys[-1], (BATCH, WIDTH))


loss = remat_tui.target(args=example_args, name="loss")(loss_under(WRITTEN))
