"""A test model for `verify`'s bisection (issue 43): eight layers, each
pre-activation named (`h1` ... `h8`), one of which (NOISY, `h5`) adds noise drawn
through a `jax.pure_callback` over Python state, as tests/models/stateful_noise.py
does: the first draw of a step adds 0, every later one NOISE more. A policy
that recomputes `h5` runs the callback again in the backward pass and moves
the gradients; recomputing any other name recomputes it from the saved
names around it, and the callback does not run again.

`loss_under(policy)` is the loss under `jax.checkpoint(policy=policy)`
(None: as written, not checkpointed), the oracle's factory; the registered
target, `loss`, is the code as written.
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


def _draw(z):
    k = draws[0]
    draws[0] += 1
    return np.full(z.shape, NOISE * k, dtype=z.dtype)


def noise(z):
    z = jax.lax.stop_gradient(z)  # drawn, not differentiated
    return jax.pure_callback(_draw, jax.ShapeDtypeStruct(z.shape, z.dtype), z)


@jax.custom_vjp
def _step_ends(params):
    return params


def _step_ends_fwd(params):
    return params, None


def _step_ends_bwd(_, grads):
    # After every gradient is computed: the next step draws from 0 again.
    def reset(grads):
        draws[0] = 0
        return grads

    shapes = jax.tree.map(lambda g: jax.ShapeDtypeStruct(g.shape, g.dtype), grads)
    return (jax.pure_callback(reset, shapes, grads),)


_step_ends.defvjp(_step_ends_fwd, _step_ends_bwd)


def _loss(params, x):
    params = _step_ends(params)
    h = x
    for i, name in enumerate(NAMES):
        z = h @ params[f"W{i + 1}"]
        if name == NOISY:
            z = z + noise(z)
        # The pre-activation named: the backward pass needs it (tanh's
        # derivative, the next layer's input), so saved, nothing before it runs again.
        h = jnp.tanh(checkpoint_name(z, name))
    return jnp.mean(h**2)


def loss_under(policy):
    """The loss under `jax.checkpoint(policy=policy)`; None: as written."""
    return _loss if policy is None else jax.checkpoint(_loss, policy=policy)


def example_args():
    keys = jax.random.split(jax.random.key(0), len(NAMES) + 1)
    params = {
        f"W{i + 1}": 1.5 * jax.random.normal(keys[i], (WIDTH, WIDTH)) / WIDTH**0.5
        for i in range(len(NAMES))
    }
    return params, jax.random.normal(keys[-1], (BATCH, WIDTH))


loss = remat_tui.target(args=example_args, name="loss")(loss_under(None))
