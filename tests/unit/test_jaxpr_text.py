"""The panes show JAX's own text: the jaxpr printed with its line map equals
`str(jaxpr)`, for every example target and every edge case, on whichever JAX
runs the suite (each end of the supported range runs it: noxfile.py)."""

import jax
import jax.numpy as jnp
import pytest
from conftest import example
from jax.tree_util import tree_flatten, tree_unflatten
from test_edge_cases import CASES

import remat_tui
from remat_tui.core import jaxcompat as jc
from remat_tui.core.setup import loading, policies
from remat_tui.core.trace import linemap


def linear_solve(b):
    """lax.custom_linear_solve keeps its jaxprs in a namedtuple param."""
    matrix = jnp.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]])

    def matvec(x):
        return matrix @ x

    def solve(matvec, x):
        return jnp.linalg.solve(matrix, x)

    return jnp.sin(jax.lax.custom_linear_solve(matvec, jnp.sin(b), solve, symmetric=True)).sum()


def fwd_and_bwd(fn, args, kwargs):
    """The two jaxprs the panes print, traced as JAX's notebook helper does."""
    leaves, in_tree = tree_flatten((args, kwargs))

    def flat(*xs):
        a, kw = tree_unflatten(in_tree, xs)
        return fn(*a, **kw)

    fwd, (out, vjp) = jax.make_jaxpr(lambda *a: jax.vjp(flat, *a), return_shape=True)(*leaves)
    res, res_tree = tree_flatten(vjp)
    cts, ct_tree = tree_flatten(out)

    def backward(*xs):
        return tree_unflatten(res_tree, xs[: len(res)])(tree_unflatten(ct_tree, xs[len(res) :]))

    return fwd, jax.make_jaxpr(backward)(*res, *cts)


def targets():
    for name, (fn, args, kwargs) in CASES.items():
        yield pytest.param(fn, args, kwargs, id=name)
    yield pytest.param(linear_solve, (jnp.ones(3),), {}, id="custom_linear_solve")
    for file in ("mlp.py", "notebook.py", "transformer.py", "flax_nnx.py", "flax_linen.py",
                 "equinox_transformer.py"):  # fmt: skip
        for name, target in loading.load_targets(example(file)).items():
            if name == "unrolled":
                continue  # 24 layers: the scanned twin covers the same printing
            args, kwargs = loading.resolve_arguments(target)
            yield pytest.param(target.fn, args, kwargs, id=f"{file}:{name}")


@pytest.mark.parametrize("policy", ["as_written", "nothing_saveable"])
@pytest.mark.parametrize("fn,args,kwargs", list(targets()))
def test_pane_text_is_jaxs_own(fn, args, kwargs, policy):
    spec = policies.parse(policy)
    if spec.kind != policies.AS_WRITTEN:
        fn = jax.checkpoint(fn, policy=policies.build(spec))
    for jaxpr in fwd_and_bwd(fn, args, kwargs):
        text, lay = linemap.layout(jc.open_jaxpr(jaxpr))
        assert text == str(jaxpr)
        # and the line map places every top-level equation
        assert sorted(lay.own) == list(range(len(jc.open_jaxpr(jaxpr).eqns)))


def test_custom_linear_solve_panes_equal_str():
    a = remat_tui.analyze(linear_solve, args=(jnp.ones(3),))
    fwd, bwd = fwd_and_bwd(linear_solve, (jnp.ones(3),), {})
    assert "custom_linear_solve" in str(fwd) + str(bwd)
    assert a.forward.text == str(fwd)
    assert a.backward.text == str(bwd)
