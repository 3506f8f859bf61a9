"""FLOP counts (core/costs/flops.py, Contract 6): hand-computed values on small
programs, recompute FLOPs under policies, and XLA's own cost analysis."""

import jax
import jax.numpy as jnp
import pytest
from jax import lax

import remat_tui
from remat_tui.core import jaxcompat as jc
from remat_tui.core.costs import flops
from remat_tui.core.units import human_flops
from remat_tui.report.phrases import percent, recompute_summary, summary


def count(f, *args) -> flops.Count:
    return flops.count(jax.make_jaxpr(f)(*args))


def xla_flops(f, *args) -> float:
    """XLA's count for the compiled program: its `flops` plus its
    `transcendentals` (XLA keeps those apart; Contract 6 counts each as one)."""
    cost = jax.jit(f).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return cost.get("flops", 0.0) + cost.get("transcendentals", 0.0)


def test_matmul_chain_is_two_times_multiply_adds():
    a, b, c = jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32, 4))
    assert count(lambda a, b, c: a @ b @ c, a, b, c) == flops.Count(
        2 * 8 * 16 * 32 + 2 * 8 * 32 * 4
    )
    # batch dims count once: 2 * batch * lhs free * rhs free * contracting
    x, y = jnp.ones((3, 5, 7)), jnp.ones((3, 7, 2))
    assert count(lambda x, y: jnp.einsum("bij,bjk->bik", x, y), x, y).flops == 2 * 3 * 5 * 2 * 7
    # two contracting dimensions
    p, q = jnp.ones((4, 5, 6)), jnp.ones((5, 6, 3))
    assert count(lambda p, q: jnp.tensordot(p, q, 2), p, q).flops == 2 * 4 * 3 * 5 * 6


def test_elementwise_ops_count_one_per_element_and_data_movement_zero():
    x, y = jnp.ones((4, 6)), jnp.ones((6,))

    def f(x, y):
        z = jnp.sin(x) * y  # broadcast of y: 0; sin 24; mul 24
        w = z.T.reshape(24)[2:]  # transpose, reshape, slice: 0
        s = jnp.where(w > 0, w, 0.0)  # gt 22; select_n 22 (converts, broadcasts: 0)
        return jnp.sum(s).astype(jnp.bfloat16)  # 22 values summed: 21 adds; convert 0

    assert count(f, x, y) == flops.Count(24 + 24 + 22 + 22 + 21)


def test_reductions_count_combining_steps():
    x = jnp.ones((4, 6))
    assert count(lambda x: jnp.sum(x, axis=1), x).flops == 4 * 6 - 4
    assert count(lambda x: jnp.max(x), x).flops == 4 * 6 - 1
    assert count(lambda x: jnp.cumsum(x, axis=1), x).flops == 24  # one per output


def test_calls_count_their_bodies_once_per_use():
    x = jnp.ones((10,))
    g = jax.jit(jnp.sin)
    assert count(lambda x: g(g(g(x))), x).flops == 30  # one shared body, three uses
    assert count(jax.nn.relu, x).flops == 10  # custom_jvp_call: its body, max
    assert count(jax.checkpoint(lambda x: jnp.cos(x) + 1.0), x).flops == 20


def test_scan_of_layers_is_length_times_one_layer():
    layers = 6

    def layer(x, w):
        return jnp.tanh(x @ w)

    def scanned(x, ws):
        return jnp.sum(lax.scan(lambda c, w: (layer(c, w), None), x, ws)[0])

    def unrolled(x, ws):
        for i in range(layers):
            x = layer(x, ws[i])
        return jnp.sum(x)

    x, ws = jnp.ones((4, 8)), jnp.ones((layers, 8, 8))
    one = count(layer, x, ws[0]).flops
    assert one == 2 * 4 * 8 * 8 + 32
    assert count(scanned, x, ws) == flops.Count(layers * one + 31)
    assert count(unrolled, x, ws) == count(scanned, x, ws)
    # the same through an analysis: forward of the scan = forward of the loop
    a, b = remat_tui.analyze(scanned, (x, ws)), remat_tui.analyze(unrolled, (x, ws))
    assert a.flops["forward"] == b.flops["forward"] and a.flops_exact


def test_while_body_counts_once_and_is_flagged_inexact():
    def f(x, n):
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, jnp.sin(c[1])), (0, x))[1]

    x = jnp.ones((10,))
    # cond: lt (1); body: add (1) + sin (10); whatever the trip count
    assert count(f, x, 3) == flops.Count(1 + 1 + 10, exact=False)
    # only the test costs anything: still inexact; a loop that costs 0 is exact
    assert count(lambda n: lax.while_loop(lambda i: i < n, lambda i: i, 0), 3) == flops.Count(
        1, exact=False
    )
    assert count(lambda x: lax.while_loop(lambda c: False, lambda c: c, x), x) == flops.Count(0)


def test_while_in_an_analysis_is_flagged_in_the_json_and_summary():
    def f(x):
        # the loop's carry is not differentiated, so vjp keeps it in the forward pass
        y = lax.while_loop(
            lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0), (0, lax.stop_gradient(x))
        )[1]
        return jnp.sum(jax.checkpoint(lambda x: jnp.sin(x) * y)(x))

    a = remat_tui.analyze(f, (jnp.ones((5,)),), policy="nothing_saveable")
    d = a.to_dict()
    assert d["flops_exact"] is False and d["schema"] == 1
    assert a.flops["recompute"] > 0
    assert "recompute ≈" in summary(a)


def test_cond_counts_its_costliest_branch():
    x, w = jnp.ones((4, 8)), jnp.ones((8, 8))

    def f(p, x, w):
        return lax.cond(p, lambda x, w: jnp.sin(x @ w), lambda x, w: x + 1.0, x, w)

    assert count(f, True, x, w) == flops.Count(2 * 4 * 8 * 8 + 32)


def checkpointed_mlp(policy):
    def mlp(w1, w2, x):
        h = jnp.tanh(x @ w1)  # [3,4] @ [4,8]: 192; tanh 24
        return jnp.sum(jnp.tanh(h @ w2))  # [3,8] @ [8,2]: 96; tanh 6; sum of 6: 5

    return mlp, (jnp.ones((4, 8)), jnp.ones((8, 2)), jnp.ones((3, 4))), policy


# The transpose of tanh: JAX 0.10 multiplies the cotangent by `1 - tanh^2` in
# three elementwise steps (3 x 30); JAX 0.11+ saves one_minus_square and
# multiplies once (30). The four transposed dots: 96 + 96 + 192 + 192.
TANH_TRANSPOSE = 90 if jc.version_tuple()[:2] < (0, 11) else 30
REST = TANH_TRANSPOSE + 576


@pytest.mark.parametrize(
    "policy, forward, backward, recompute",
    [
        # Nothing saved: the backward remat re-runs the forward up to the last tanh
        # (192 + 24 + 96 + 6; the final sum is not needed) and the two `1 - tanh`
        # factors of tanh's derivative (24 + 6), which are computed from
        # residuals without a cotangent: 348. The rest of the backward pass:
        # REST (above). The forward pass is the primal alone: 323.
        ("nothing_saveable", 323, 348 + REST, 348),
        # Everything saved: the forward also computes the `1 - tanh` factors
        # (+30) and the backward recomputes nothing.
        ("everything_saveable", 353, REST, 0),
        # Dots saved: the tanh outputs and their `1 - tanh` are recomputed.
        ("dots_saveable", 323, 60 + REST, 24 + 24 + 6 + 6),
    ],
)
def test_recompute_flops_of_a_checkpointed_mlp(policy, forward, backward, recompute):
    fn, args, policy = checkpointed_mlp(policy)
    a = remat_tui.analyze(fn, args, policy=policy)
    assert a.flops == {"forward": forward, "backward": backward, "recompute": recompute}
    assert a.flops_exact
    assert a.to_dict()["flops"] == a.flops


def test_recompute_in_a_scan_counts_every_iteration():
    layers = 5
    block = jax.checkpoint(
        lambda x, w: jnp.tanh(x @ w), policy=jax.checkpoint_policies.nothing_saveable
    )

    def scanned(x, ws):
        return jnp.sum(lax.scan(lambda c, w: (block(c, w), None), x, ws)[0])

    x, ws = jnp.ones((4, 8)), jnp.ones((layers, 8, 8))
    a = remat_tui.analyze(scanned, (x, ws))
    one = 2 * 4 * 8 * 8 + 32 + 32  # the dot, tanh and `1 - tanh`, per iteration
    assert a.flops["recompute"] == layers * one
    assert a.backward.recompute_eqns == 3  # the equation count stays per body


def test_summary_leads_with_recompute_flops():
    fn, args, _ = checkpointed_mlp(None)
    a = remat_tui.analyze(fn, args, policy="nothing_saveable")
    assert recompute_summary(a) == "recompute 348 FLOP (108% of forward)"
    assert summary(a).endswith(" · recompute 348 FLOP (108% of forward)")
    b = remat_tui.analyze(fn, args, policy="everything_saveable")
    assert recompute_summary(b) == "no recompute"


def test_human_flops_and_percent():
    assert [human_flops(n) for n in (0, 999, 1500, 2.5e9, 3e15)] == [
        "0 FLOP",
        "999 FLOP",
        "1.5 kFLOP",
        "2.5 GFLOP",
        "3.0 PFLOP",
    ]
    assert [percent(*p) for p in ((35, 100), (35, 1000), (1, 10**6), (0, 5))] == [
        "35%",
        "3.5%",
        "<0.1%",
        "0%",
    ]


# Against XLA. XLA's HloCostAnalysis counts a dot as 2 x multiply-adds and a
# convolution as 2 x the multiply-adds that touch real input (not padding),
# as our rules do, so programs made of dots and convolutions match exactly.
# Elementwise work may differ: XLA counts converts and some copies as 1 per
# element (we count 0), expands some ops (logistic: 3 flops + 1
# transcendental; we count 1), and fuses or removes others (a transpose
# folded into a dot, dead code). On programs where dots dominate, that is a
# fraction of a percent of the total: 1% is the tolerance. Programs with
# scans are left out: XLA counts a scan (while loop) body once.


def test_dot_chain_matches_xla_exactly():
    a, b, c = jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32, 4))

    def f(a, b, c):
        return jnp.einsum("ij,jk,kl->il", a, b, c)

    assert count(f, a, b, c).flops == xla_flops(f, a, b, c)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window_strides": (1, 1), "padding": "SAME"},
        {"window_strides": (2, 2), "padding": "VALID"},
        {"window_strides": (2, 1), "padding": ((2, 1), (0, 3)), "rhs_dilation": (2, 1)},
        {"window_strides": (1, 1), "padding": ((1, 1), (2, 2)), "lhs_dilation": (2, 3)},
        {"window_strides": (1, 1), "padding": "SAME", "feature_group_count": 3},
    ],
)
def test_convolution_matches_xla_exactly(kwargs):
    groups = kwargs.get("feature_group_count", 1)
    img, kernel = jnp.ones((2, 6, 17, 13)), jnp.ones((6, 6 // groups, 3, 4))

    def f(img, kernel):
        return lax.conv_general_dilated(img, kernel, **kwargs)

    assert count(f, img, kernel).flops == xla_flops(f, img, kernel)


def test_mlp_and_its_gradient_match_xla_within_one_percent():
    dims = [64, 256, 256, 32]
    keys = jax.random.split(jax.random.key(0), 3)
    params = [
        (jax.random.normal(keys[i], (dims[i], dims[i + 1])), jnp.zeros(dims[i + 1]))
        for i in range(3)
    ]
    x = jnp.ones((16, 64))

    def mlp(params, x):
        for w, b in params:
            x = jnp.tanh(x @ w + b)
        return jnp.mean(x**2)

    def gradient(params, x):
        out, vjp = jax.vjp(mlp, params, x)
        return out, vjp(jnp.ones_like(out))

    assert count(mlp, params, x).flops == pytest.approx(xla_flops(mlp, params, x), rel=0.01)
    a = remat_tui.analyze(mlp, (params, x))
    ours = a.flops["forward"] + a.flops["backward"]
    assert ours == pytest.approx(xla_flops(gradient, params, x), rel=0.01)
