"""A test model for `verify` (Contract 18, issue 43): a block that draws
noise through a `jax.pure_callback` over Python state, a count of the draws.
The first draw of a step adds 0, every later one NOISE more: a checkpoint
that recomputes the block runs the callback again in the backward pass, and
the gradients the recomputed block gives are not those of the forward pass.

The state is reset at the end of each step's backward pass (`_step_ends`, an
identity on the parameters whose backward resets it, after every gradient
is computed), so the code as written gives the same values step after step,
and a configuration that saves the block's values gives them too.

`loss_under(policy)` builds the loss with its noisy block under
`jax.checkpoint(policy=policy)` (None: not checkpointed): the oracle's
factory. The registered target, `loss`, is the code as written, no
checkpoint.
"""

import jax
import jax.numpy as jnp
import numpy as np

import remat_tui

WIDTH, BATCH = 16, 8
NOISE = 0.1
draws = [0]  # the Python state: the noise's draws since the step began


def _draw(h):
    k = draws[0]
    draws[0] += 1
    return np.full(h.shape, NOISE * k, dtype=h.dtype)


def noise(h):
    # Drawn, not differentiated (a pure_callback has no derivative).
    h = jax.lax.stop_gradient(h)
    return jax.pure_callback(_draw, jax.ShapeDtypeStruct(h.shape, h.dtype), h)


def block(h):
    return jnp.tanh(h + noise(h))


@jax.custom_vjp
def _step_ends(params):
    return params


def _step_ends_fwd(params):
    return params, None


def _step_ends_bwd(_, grads):
    def reset(grads):
        draws[0] = 0
        return grads

    shapes = jax.tree.map(lambda g: jax.ShapeDtypeStruct(g.shape, g.dtype), grads)
    return (jax.pure_callback(reset, shapes, grads),)


_step_ends.defvjp(_step_ends_fwd, _step_ends_bwd)


def loss_under(policy):
    """The loss with its block under `jax.checkpoint(policy=policy)`; None:
    as written, not checkpointed."""
    inner = block if policy is None else jax.checkpoint(block, policy=policy)

    def loss(params, x):
        params = _step_ends(params)
        h = inner(x @ params["W1"])
        return jnp.mean((h @ params["W2"]) ** 2)

    return loss


def example_args(batch=BATCH):
    # Takes `batch`: the target scales, for fit (fit --optimize --verify).
    params = {
        "W1": jax.random.normal(jax.random.key(0), (WIDTH, WIDTH)) / WIDTH**0.5,
        "W2": jax.random.normal(jax.random.key(1), (WIDTH, 4)) / WIDTH**0.5,
    }
    return params, jax.random.normal(jax.random.key(2), (batch, WIDTH))


loss = remat_tui.target(args=example_args, name="loss")(loss_under(None))
