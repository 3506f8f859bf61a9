"""The functions of JAX's remat notebook (docs: "Practical examples"), as targets.

f: three sin(W @ x) layers; f2: each layer under jax.checkpoint; f3: f with
dots_with_no_batch_dims_saveable; f4: named layer outputs, saving only 'a';
loss: a scalar loss over f4's layers; chain / recursive: a long chain of sin,
plainly and with recursive (binomial) checkpointing.
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

import remat_tui


def example_args():
    return (jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4))


def g(W, x):
    y = jnp.dot(W, x)
    return jnp.sin(y)


@remat_tui.target(args=example_args)
def f(W1, W2, W3, x):
    x = g(W1, x)
    x = g(W2, x)
    x = g(W3, x)
    return x


@remat_tui.target(args=example_args)
def f2(W1, W2, W3, x):
    x = jax.checkpoint(g)(W1, x)
    x = jax.checkpoint(g)(W2, x)
    x = jax.checkpoint(g)(W3, x)
    return x


f3 = remat_tui.target(args=example_args, name="f3")(
    jax.checkpoint(f, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
)


def f4_layers(W1, W2, W3, x):
    x = checkpoint_name(g(W1, x), name="a")
    x = checkpoint_name(g(W2, x), name="b")
    x = checkpoint_name(g(W3, x), name="c")
    return x


f4 = remat_tui.target(args=example_args, name="f4")(
    jax.checkpoint(f4_layers, policy=jax.checkpoint_policies.save_only_these_names("a"))
)


@remat_tui.target(
    args=example_args,
    policies={
        "save_a_and_dots": jax.checkpoint_policies.save_from_both_policies(
            jax.checkpoint_policies.dots_saveable,
            jax.checkpoint_policies.save_only_these_names("a"),
        ),
    },
)
def loss(W1, W2, W3, x):
    return jnp.sum(f4_layers(W1, W2, W3, x) ** 2)


def _chain_fns(n):
    return [jnp.sin] * n


@remat_tui.target(args=lambda: (jnp.ones(3),))
def chain(x):
    """sin applied 8 times: as written, every intermediate cosine is saved."""
    for fn in _chain_fns(8):
        x = fn(x)
    return x


def recursive_checkpoint(funs):
    """Checkpoint halves of halves: O(log n) saved values for an n-step chain."""
    if len(funs) == 1:
        return funs[0]
    if len(funs) == 2:
        f1, f2 = funs
        return lambda x: f1(f2(x))
    f1 = recursive_checkpoint(funs[: len(funs) // 2])
    f2 = recursive_checkpoint(funs[len(funs) // 2 :])
    return lambda x: f1(jax.checkpoint(f2)(x))


recursive = remat_tui.target(args=lambda: (jnp.ones(3),), name="recursive")(
    recursive_checkpoint(_chain_fns(8))
)
