"""A test model for `fit --optimize --verify` (issue 43): a scan of tanh
layers, each drawing noise through a `jax.pure_callback` over Python state
(a count of the draws, reset at the end of each step's backward pass, as in
stateful_noise.py), with a batch to grow. Its layer is checkpointed as
written under `everything_saveable`, which saves the noise: the code as
written computes the gradients of what its forward pass drew. On a CPU a
configuration that recomputes the layer (`nothing_saveable` at the site) has
a lower compiled peak, so it is the answer within a tight budget; but it
runs the callback again in the backward pass, and its gradients differ.

`loss_under(site, outer)`: the loss with its layer under
`jax.checkpoint(policy=site)` and the whole under `jax.checkpoint(policy=outer)`
(None: no outer checkpoint): the oracle's factory.
"""

import jax
import jax.numpy as jnp
import numpy as np

import remat_tui

WIDTH, LAYERS, BATCH = 16, 4, 16
NOISE = 0.1
draws = [0]  # the Python state: the noise's draws since the step began


def _draw(h):
    k = draws[0]
    draws[0] += 1
    return np.full(h.shape, NOISE * k, dtype=h.dtype)


def noise(h):
    h = jax.lax.stop_gradient(h)
    return jax.pure_callback(_draw, jax.ShapeDtypeStruct(h.shape, h.dtype), h)


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


def layer(h, w):
    h = jnp.tanh(h @ w)
    return jnp.tanh(h + noise(h)), None


def loss_under(site, outer=None):
    """The loss with its layer checkpointed under `site` and, unless None,
    the whole under `outer`."""
    body = jax.checkpoint(layer, policy=site)

    def loss(params, x):
        params = _step_ends(params)
        h, _ = jax.lax.scan(body, x, params["layers"])
        return jnp.mean(h**2)

    return loss if outer is None else jax.checkpoint(loss, policy=outer)


def example_args(batch=BATCH):
    layers = jax.random.normal(jax.random.key(0), (LAYERS, WIDTH, WIDTH)) / WIDTH**0.5
    return {"layers": layers}, jax.random.normal(jax.random.key(1), (batch, WIDTH))


loss = remat_tui.target(args=example_args, name="loss")(
    loss_under(jax.checkpoint_policies.everything_saveable)
)
