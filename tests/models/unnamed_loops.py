"""Checkpoints without a checkpoint_name, as users' code has them: a Python
loop calling `jax.checkpoint(layer)`, and three checkpoints on three lines
(the seed notebook's f2). Each a factory taking the policy of each call
(None: the call as written, `jax.checkpoint(layer)`; AS_WRITTEN: no
checkpoint, `layer` called directly), so that tests build by hand what a
configuration or a pasted snippet makes; and a complex rotation (a rope)
whose checkpoint JAX refuses to trace under everything_saveable.
"""

import jax
import jax.numpy as jnp

import remat_tui

AS_WRITTEN = "as_written"  # a call with no checkpoint
LAYERS = 3


def layer(w, x):
    return jnp.tanh(x @ w)


def loop_args():
    keys = jax.random.split(jax.random.PRNGKey(0), LAYERS + 1)
    ws = [jax.random.normal(k, (16, 16)) * 0.3 for k in keys[:LAYERS]]
    return (ws, jax.random.normal(keys[-1], (4, 16)))


def checkpointed(fn, policy):
    """`fn` as one call runs it under `policy` (module doc)."""
    if policy is None:
        return jax.checkpoint(fn)
    if policy == AS_WRITTEN:
        return fn
    return jax.checkpoint(fn, policy=policy)


def make_loop_of(call_at):
    """The loop with each call's callable given by `call_at(i)`: what the
    snippet remat-tui prints for a loop (`layer_at(i)`) is pasted into."""

    def loop(ws, x):
        for i, w in enumerate(ws):
            x = call_at(i)(w, x)
        return jnp.sum(x**2)

    return loop


def make_loop(policy_of=lambda i: None):
    """The loop, call i under `policy_of(i)`: one line applies every
    checkpoint (checkpointed's)."""
    return make_loop_of(lambda i: checkpointed(layer, policy_of(i)))


loop = remat_tui.target(args=loop_args, name="loop")(make_loop())


def batched_args(batch=4):
    """Two layers and a wide head, at any batch (for fit)."""
    keys = jax.random.split(jax.random.PRNGKey(1), 4)
    ws = [jax.random.normal(k, (32, 32)) * 0.2 for k in keys[:2]]
    head = jax.random.normal(keys[2], (32, 512)) * 0.2
    return (ws, head, jax.random.normal(keys[-1], (batch, 32)))


def make_headed(policy_of=lambda i: None):
    """The loop under per-call policies, then a wide head outside every
    checkpoint: only a policy around the whole function recomputes it."""

    def headed(ws, head, x):
        for i, w in enumerate(ws):
            x = checkpointed(layer, policy_of(i))(w, x)
        return jnp.sum(jnp.sin(x @ head) ** 2)

    return headed


batched = remat_tui.target(args=batched_args, name="batched")(make_headed())


def make_lines(p1=None, p2=None, p3=None):
    """Three checkpoints of one function on three lines (each line's own)."""

    def lines(ws, x):
        x = (layer if p1 == AS_WRITTEN else jax.checkpoint(layer, policy=p1))(ws[0], x)
        x = (layer if p2 == AS_WRITTEN else jax.checkpoint(layer, policy=p2))(ws[1], x)
        x = (layer if p3 == AS_WRITTEN else jax.checkpoint(layer, policy=p3))(ws[2], x)
        return jnp.sum(x**2)

    return lines


lines = remat_tui.target(args=loop_args, name="lines")(make_lines())


def rotate(w, x):
    """x @ w rotated as complex pairs (a rope), then squashed."""
    h = x @ w
    theta = jnp.arange(h.shape[-1] // 2) * 0.1
    z = (h[..., ::2] + 1j * h[..., 1::2]) * jnp.exp(1j * theta)
    return jnp.tanh(jnp.concatenate([z.real, z.imag], -1))


def make_rope(policy=None):
    def rope(w, x):
        return jnp.sum(checkpointed(rotate, policy)(w, x) ** 2)

    return rope


def rope_args():
    return (jnp.ones((16, 16)) * 0.1, jnp.ones((4, 16)))


rope = remat_tui.target(args=rope_args, name="rope")(make_rope())
