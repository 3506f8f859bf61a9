"""Functions that stress the residual list and the line maps, each checked
against JAX's own print_saved_residuals (captured now, never pasted)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import jax_saved_residuals
from jax.ad_checkpoint import checkpoint_name

import remat_tui

W = jnp.ones((3, 3))
CONST = np.ones((3,), np.float32) * 2
X = jnp.ones(3)


def scanned(x):
    def body(c, _):
        return jnp.sin(c), jnp.cos(c)

    c, ys = jax.lax.scan(body, x, None, length=4)
    return c + ys.sum()


@jax.custom_jvp
def sin_jvp(x):
    return jnp.sin(x)


@sin_jvp.defjvp
def _sin_jvp(primals, tangents):
    return sin_jvp(primals[0]), jnp.cos(primals[0]) * tangents[0]


@jax.custom_vjp
def sin_vjp(x):
    return jnp.sin(x)


sin_vjp.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda res, g: (res * g,))
inner = jax.jit(lambda x: jnp.sin(x) * x)

CASES = {
    "one-line jaxpr": (lambda x: jnp.sin(x), (X,), {}),
    "ShapeDtypeStruct input": (
        lambda x: jnp.sin(x),
        (jax.ShapeDtypeStruct((3,), jnp.float32),),
        {},
    ),
    "python float": (lambda x: jnp.sin(x), (1.0,), {}),
    "dict output": (lambda x: {"a": jnp.sin(x), "b": jnp.cos(x)}, (X,), {}),
    "integer side output": (
        lambda x: (jnp.sum(jnp.sin(x)), jnp.int32(3) + jnp.argmax(x)),
        (X,),
        {},
    ),
    "keyword arguments": (lambda x, *, w: jnp.sin(w @ x), (X,), {"w": W}),
    "closed-over constant": (lambda x: jnp.sin(CONST * x) * CONST, (X,), {}),
    "no residuals": (lambda x: 2.0 * x, (X,), {}),
    "empty checkpoint_name": (lambda x: jnp.sin(checkpoint_name(jnp.sin(x), "")), (X,), {}),
    "scan": (scanned, (X,), {}),
    "cond": (lambda x: jax.lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x), (X,), {}),
    "custom_jvp": (lambda x: sin_jvp(x) * 2, (X,), {}),
    "custom_vjp": (lambda x: sin_vjp(x) * x, (X,), {}),
    "jit called twice": (lambda x: inner(inner(x)), (X,), {}),
    "fori_loop": (lambda x: jax.lax.fori_loop(0, 3, lambda i, c: jnp.sin(c), x), (X,), {}),
    "reduce_precision": (
        lambda x: jnp.sin(jax.lax.reduce_precision(jnp.sin(x), 5, 10)),
        (X,),
        {},
    ),
    "bfloat16": (lambda x: jnp.sin(x.astype(jnp.bfloat16)).astype(jnp.float32), (X,), {}),
    "PRNG key argument": (
        lambda k, x: jnp.sin(x) * jax.random.normal(k, (3,)),
        (jax.random.key(0), X),
        {},
    ),
}
POLICIES = ["as_written", "nothing_saveable", "dots_saveable"]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", list(CASES))
def test_matches_jax(case, policy):
    fn, args, kwargs = CASES[case]
    want = jax_saved_residuals(fn, policy, args, kwargs)
    a = remat_tui.analyze(fn, args=args, kwargs=kwargs, policy=policy)
    assert [r.text for r in a.residuals] == want
    for r in a.residuals:  # every residual is placed in the forward pane
        if r.kind in ("output", "named", "jit_output", "argument"):
            assert r.forward_var and r.forward_lines, r


def test_recomputation_counts_each_use_of_a_checkpointed_layer():
    layer = jax.checkpoint(lambda x: jnp.sin(jnp.sin(x)))

    def stack(n):
        def f(x):
            for _ in range(n):
                x = layer(x)
            return x.sum()

        return f

    once = remat_tui.analyze(stack(1), args=(X,)).backward.recompute_eqns
    thrice = remat_tui.analyze(stack(3), args=(X,)).backward.recompute_eqns
    assert once > 0 and thrice == 3 * once


@pytest.mark.parametrize(
    "fn,args",
    [
        (
            lambda x, w: jax.lax.conv(x, w, (1, 1), "SAME").sum(),
            (jnp.ones((1, 1, 5, 5)), jnp.ones((1, 1, 3, 3))),
        ),
        (lambda x: (sin_vjp(x) * x).sum(), (X,)),
    ],
    ids=["conv", "custom_vjp"],
)
def test_no_recomputation_without_checkpoint(fn, args):
    a = remat_tui.analyze(fn, args=args)
    assert a.backward.recompute_eqns == 0 and not a.backward.recompute_lines
