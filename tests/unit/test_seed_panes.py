"""The panes are JAX's notebook's own text for the user's actual call: the
seed (JAX's remat notebook) prints them with its `print_fwd_bwd`, which takes
the backward pass from `jax.vjp` run on the values. There one array passed as
three arguments is one object (every use reads one input) and a Python float
is a constant JAX bakes in (`3.0:f32[]`). The residual list stays
print_saved_residuals' for the same call."""

import contextlib
import io

import jax
import jax.ad_checkpoint
import jax.numpy as jnp
import numpy as np
import pytest
import rich.text
from jax.tree_util import tree_flatten, tree_unflatten

import remat_tui


def print_fwd_bwd(f, *args, **kwargs) -> tuple[str, str]:
    """The seed's helper as it is written there, returning the two texts its
    table prints (forward, backward) instead of printing them."""
    args, in_tree = tree_flatten((args, kwargs))

    def f_(*args):
        args, kwargs = tree_unflatten(in_tree, args)
        return f(*args, **kwargs)

    fwd = jax.make_jaxpr(lambda *args: jax.vjp(f_, *args))(*args).jaxpr

    y, f_vjp = jax.vjp(f_, *args)
    res, in_tree = tree_flatten(f_vjp)

    def g_(*args):
        *res, y = args
        f_vjp = tree_unflatten(in_tree, res)
        return f_vjp(y)

    bwd = jax.make_jaxpr(g_)(*res, y).jaxpr
    return rich.text.Text.from_ansi(str(fwd)).plain, rich.text.Text.from_ansi(str(bwd)).plain


def saved_residuals(f, *args) -> list[str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        jax.ad_checkpoint.print_saved_residuals(f, *args)
    return buf.getvalue().splitlines()


# ---- the seed's functions, as written there ---------------------------------------


def g(W, x):
    y = jnp.dot(W, x)
    return jnp.sin(y)


def f(W1, W2, W3, x):
    x = g(W1, x)
    x = g(W2, x)
    x = g(W3, x)
    return x


def recursive_checkpoint(funs):
    if len(funs) == 1:
        return funs[0]
    elif len(funs) == 2:
        f1, f2 = funs
        return lambda x: f1(f2(x))
    else:
        f1 = recursive_checkpoint(funs[: len(funs) // 2])
        f2 = recursive_checkpoint(funs[len(funs) // 2 :])
        return lambda x: f1(jax.checkpoint(f2)(x))


def one_array_three_times():
    W1 = W2 = W3 = jnp.ones((4, 4))
    return f, (W1, W2, W3, jnp.ones(4))


def python_float():
    return recursive_checkpoint([jnp.sin] * 8), (3.0,)


def numpy_scalar_and_shared_array():
    W = jnp.ones((4, 4))
    return jax.checkpoint(f, policy=jax.checkpoint_policies.dots_saveable), (
        W,
        W,
        np.ones((4, 4), np.float32),
        jnp.ones(4),
    )


def one_array_in_a_list_not_all_needed():
    """Every position of a shared array is kept for the backward pass, needed
    or not (jax.vjp keeps an argument by identity)."""

    def total(xs):
        return sum(jnp.sin(x).sum() for x in xs[:2]) + jnp.stack(xs).sum()

    nothing = jax.checkpoint_policies.nothing_saveable
    return jax.checkpoint(total, policy=nothing), ([jnp.ones(2)] * 4,)


CALLS = [
    one_array_three_times,
    python_float,
    numpy_scalar_and_shared_array,
    one_array_in_a_list_not_all_needed,
]


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.__name__)
def test_panes_are_print_fwd_bwd_text_for_the_call(call):
    fn, args = call()
    forward, backward = print_fwd_bwd(fn, *args)
    a = remat_tui.analyze(fn, args=args)
    assert a.forward.text == forward
    assert a.backward.text == backward
    assert [r.text for r in a.residuals] == saved_residuals(fn, *args)


def test_shared_array_is_read_through_one_input():
    """W1 = W2 = W3: all three weights' gradients read the last one's input,
    as in JAX's own backward pass, and the residual mark follows it."""
    fn, args = one_array_three_times()
    a = remat_tui.analyze(fn, args=args)
    w3 = next(r for r in a.residuals if r.argument == "W3")
    assert w3.backward_var == "c"
    reads = [a.backward.lines[i] for i in w3.backward_lines]
    assert sum(line.rstrip().endswith(" c") for line in reads) == 3


def test_baked_in_float_reads_no_input():
    """The Python float is a literal in the backward pass: its residual row
    (JAX lists it) has no backward input, and the literal is printed."""
    fn, args = python_float()
    a = remat_tui.analyze(fn, args=args)
    x = next(r for r in a.residuals if r.kind == "argument")
    assert x.backward_var is None and x.backward_lines == ()
    assert "3.0:f32[]" in a.backward.text
