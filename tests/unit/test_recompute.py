"""Recompute read from the linear program `jax.vjp` returns (core/trace/recomputation.py),
which compare and suggest use instead of tracing the backward pass, checked
against the backward pass JAX traces: a row-only analysis equals the full one
in its residuals, names and recompute, whichever way it got them; the reading
is used where it is exact and refused where it is not."""

import jax
import jax.numpy as jnp
import pytest
from conftest import example
from jax import lax
from test_sites import (
    ARGS,
    ckpt,
    make_jit,
    make_nested_checkpoints,
    make_scan,
    make_two_sites,
)

import remat_tui
from remat_tui.core import jaxcompat as jc
from remat_tui.core.setup import loading
from remat_tui.core.setup.config import Config
from remat_tui.core.trace.analysis import costs_view, row_view
from remat_tui.core.trace.traced import trace_config

POLICIES = ["as_written", "everything_saveable", "nothing_saveable", "dots_saveable"]


def both_ways(target, policy, sites=None):
    """The row view and the full costs of one trace: the row view comes first,
    so what it reads cannot be the backward pass the costs view traces."""
    trace = trace_config(target, Config.make(policy, sites, None, target.policies))
    row = row_view(trace)
    full = costs_view(trace)
    return full, row


def assert_same_costs(full, row):
    assert [r.text for r in row.residuals] == [r.text for r in full.residuals]
    assert row.totals == full.totals
    assert row.flops["forward"] == full.flops["forward"]
    assert row.flops["recompute"] == full.flops["recompute"]
    assert row.flops_exact == full.flops_exact
    assert row.backward.recompute_eqns == full.backward.recompute_eqns
    assert [n.name for n in row.names] == [n.name for n in full.names]
    assert [(s.id, s.effective) for s in row.sites] == [(s.id, s.effective) for s in full.sites]


def read_without_backward(row) -> bool:
    return row.flops["backward"] is None


def two_layer_transformer():
    """The example transformer's `unrolled`, two layers of it: jnp and jax.nn
    code whose linear program holds jits inside the checkpoint."""
    targets = loading.load_targets(example("transformer.py"))
    layers, x = targets["unrolled"].args()
    return remat_tui.Target(fn=targets["unrolled"].fn, name="two", args=(layers[:2], x))


@pytest.mark.parametrize("policy", [*POLICIES, "dots_with_no_batch_dims_saveable"])
def test_the_unrolled_transformer_is_read_without_its_backward_pass(policy):
    full, row = both_ways(two_layer_transformer(), policy)
    assert_same_costs(full, row)
    assert read_without_backward(row)
    if policy == "nothing_saveable":
        assert row.flops["recompute"] > 0


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", ["f", "loss", "chain"])
def test_notebook_functions_are_read_without_their_backward_pass(name, policy):
    target = loading.load_targets(example("notebook.py"))[name]
    full, row = both_ways(target, policy)
    assert_same_costs(full, row)
    assert read_without_backward(row)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_checkpoint_in_a_jit_is_read_at_its_sites(policy):
    # A site under jit: the linear program's checkpoint is still top level.
    target = remat_tui.Target(fn=make_jit(policy), name="jit", args=ARGS)
    full, row = both_ways(target, "as_written")
    assert_same_costs(full, row)
    assert read_without_backward(row)
    assert bool(row.sites) == (policy != "as_written")  # a checkpoint per layer


def test_a_checkpoint_that_is_not_differentiated_is_no_site_either_way():
    def loss(W, x):
        frozen = ckpt(lambda W, x: jnp.sin(x @ W), "nothing_saveable")(W, x)
        return jnp.sum(jax.lax.stop_gradient(frozen) * (x @ W))

    target = remat_tui.Target(fn=loss, name="frozen", args=(ARGS[0][0], ARGS[1]))
    full, row = both_ways(target, "as_written")
    assert_same_costs(full, row)
    assert read_without_backward(row) and row.sites == full.sites == []


@pytest.mark.parametrize(
    "choose",
    [
        lambda y, h: jnp.select([y > 0.5, y > 0], [h, 2 * h], 3 * h),
        lambda y, h: lax.select_n((y > 0).astype(jnp.int32) + (y > 0.5), h, 2 * h, 3 * h),
    ],
    ids=["jnp.select", "select_n of three"],
)
def test_a_select_on_an_integer_traces_the_backward_pass(choose):
    # Its transpose compares the selector with each case: forward work the
    # linear program does not hold.
    def loss(W, x):
        def body(W, x):
            h = x @ W
            return choose(jnp.sin(h), h)

        return jnp.sum(ckpt(body, "dots_saveable")(W, x))

    target = remat_tui.Target(fn=loss, name="select", args=(ARGS[0][0], ARGS[1]))
    full, row = both_ways(target, "as_written")
    assert_same_costs(full, row)
    assert not read_without_backward(row)


@pytest.mark.parametrize(
    "make, policy",
    [
        (make_scan, "nothing_saveable"),
        (make_scan, "dots_saveable"),
        (make_nested_checkpoints, "nothing_saveable"),
        (make_two_sites, "nothing_saveable"),
    ],
)
@pytest.mark.parametrize("outer", ["as_written", "nothing_saveable"])
def test_scans_and_nested_checkpoints_trace_the_backward_pass(make, policy, outer):
    target = remat_tui.Target(fn=make(policy), name=make.__name__, args=ARGS)
    full, row = both_ways(target, outer)
    assert_same_costs(full, row)
    # Read only where every checkpoint is top level: two sites, nothing around them.
    top_level = make is make_two_sites and outer == "as_written"
    assert read_without_backward(row) == top_level


def test_a_custom_vjp_that_recomputes_in_its_backward_is_not_read():
    # Its backward function does forward work from a residual, inside the
    # checkpoint's transposition: only the traced backward pass shows it.
    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)

    def f_fwd(x):
        return jnp.sin(x), x

    def f_bwd(x, g):
        return (g * jnp.cos(x),)

    f.defvjp(f_fwd, f_bwd)

    def loss(W, x):
        return jnp.sum(ckpt(lambda W, x: f(x @ W), "dots_saveable")(W, x))

    target = remat_tui.Target(fn=loss, name="custom", args=(ARGS[0][0], ARGS[1]))
    full, row = both_ways(target, "as_written")
    assert_same_costs(full, row)
    assert full.flops["recompute"] > 0
    assert not read_without_backward(row)


def every_transposed_primitive(W, x):
    """One linear use of each primitive in TRANSPOSED_WITHOUT_WORK, after a dot."""
    h = x @ W  # dot_general
    y = jnp.sin(h)
    a = (h + y) - (-h)  # add, sub, neg
    a = a * y / (1.0 + y * y)  # mul, div
    a = jnp.where(y > 0, a, h)  # select_n
    b = jnp.broadcast_to(a[None], (3, *a.shape)).sum(0)  # broadcast_in_dim, reduce_sum
    b = b.reshape(-1).reshape(a.shape).T.T  # reshape, transpose
    b = b.astype(jnp.bfloat16).astype(jnp.float32)  # convert_element_type
    c = lax.squeeze(b[None], (0,))  # squeeze
    c = c[jnp.array([1, 0])]  # gather
    c = jnp.concatenate([c[:, :2], c[:, 2:]], axis=1)  # slice, concatenate
    c = lax.dynamic_slice(jnp.pad(c, 1), (1, 1), c.shape)  # pad, dynamic_slice
    c = lax.dynamic_update_slice(c, c[:1] * 2.0, (0, 0))  # dynamic_update_slice
    c = jnp.cumsum(c, axis=1)  # cumsum
    c = jnp.array(c, copy=True) + lax.add(h, c)  # copy; add_any where tangents meet
    return jnp.sum(c * y)


def tangent_primitives(linear) -> set[str]:
    """The primitives reading a tangent in `linear`, sub-jaxprs included."""
    seen, tangent = set(), set(linear.tangents)

    def walk(jaxpr, tangent):
        for eqn in jaxpr.eqns:
            ins = [v for v in eqn.invars if isinstance(v, jc.Var)]
            if any(v in tangent for v in ins):
                seen.add(jc.primitive_name(eqn))
                tangent.update(eqn.outvars)
            for body in jc.bodies(eqn):
                pairs = zip(body.jaxpr.invars, body.inputs, strict=True)
                inner = {s for s, o in pairs if isinstance(o, jc.Var) and o in tangent}
                walk(body.jaxpr, tangent | inner)

    walk(linear.jaxpr, tangent)
    return seen


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable", "everything_saveable"])
def test_every_primitive_transposed_without_work_is_read_as_traced(policy):
    fn = ckpt(every_transposed_primitive, policy)
    args = (ARGS[0][0], ARGS[1])
    _, vjp = jax.vjp(fn, *args)
    covered = tangent_primitives(jc.linear_program(vjp, len(args)))
    missing = jc.primitives.TRANSPOSED_WITHOUT_WORK - covered
    assert not missing, f"not exercised by the test program: {sorted(missing)}"
    full, row = both_ways(remat_tui.Target(fn=fn, name="prims", args=args), "as_written")
    assert_same_costs(full, row)
    assert read_without_backward(row)


def test_compare_rows_equal_full_analyses():
    target = two_layer_transformer()
    comparison = remat_tui.compare(target, policies=POLICIES)
    for row in comparison.rows:
        full = costs_view(trace_config(target, row.config))
        assert row.recompute_flops == full.flops["recompute"]
        assert row.device_bytes == full.totals.device_bytes
        assert row.residuals == tuple(r.text for r in full.residuals)
