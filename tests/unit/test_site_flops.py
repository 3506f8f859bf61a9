"""FLOPs per checkpoint site (core/costs/site_flops.py): each site's forward FLOPs
(its body x trip count) and the recompute the backward pass spends there under
its current policy, against hand-computed values and core/costs/flops.py's count of
the site's body. Models are factories taking the checkpoints' policies, as in
test_sites.py, so an override can be compared with the code edited by hand."""

import re
from dataclasses import replace

import jax
import jax.numpy as jnp
import pytest
from conftest import example
from test_sites import (
    ARGS,
    block,
    ckpt,
    make_cond,
    make_jit,
    make_nested_checkpoints,
    make_nested_scan,
    make_scan,
    make_two_sites,
    make_vmap,
)

import remat_tui
from remat_tui.app.widgets.sidebar import site_label
from remat_tui.core.costs import flops
from remat_tui.core.model import SiteFlops
from remat_tui.report import html, markdown, phrases, text

L, B, D = 4, 2, 4  # ARGS: 4 layers of f32[4,4] weights, x f32[2,4]
DOT = 2 * B * D * D  # x @ W: 2 x multiply-adds
ELEMENTWISE = B * D  # one of sin, tanh, mul, add on f32[2,4]
BLOCK = 2 * DOT + 4 * ELEMENTWISE  # block(): two dots, sin, tanh, mul, add


def body_flops(fn, *args) -> int:
    return flops.count(jax.make_jaxpr(fn)(*args)).flops


def only_site(analysis):
    (site,) = analysis.sites
    return site


def sum_of_sites(analysis) -> int:
    return sum(s.flops.recompute for s in analysis.sites)


def test_block_costs_what_the_rules_say():
    # The hand count the tests below rest on, checked against core/costs/flops.py.
    assert BLOCK == 160
    assert body_flops(block, ARGS[0][0], ARGS[1]) == BLOCK


def test_scan_of_nothing_saveable_recomputes_every_layer():
    site = only_site(remat_tui.analyze(make_scan("nothing_saveable"), args=ARGS))
    assert site.trip_count == L
    assert site.flops.forward == L * BLOCK
    # Nothing saved: the backward pass re-runs the whole block in every layer.
    assert site.flops.recompute == L * BLOCK


def test_a_saved_name_is_not_recomputed():
    site = only_site(remat_tui.analyze(make_scan("save_only_these_names('h')"), args=ARGS))
    assert site.flops.forward == L * BLOCK  # the forward pass does not depend on the policy
    # h = sin(x @ W) is saved: its sin is not re-run, but x @ W still is (sin's
    # derivative needs its input).
    assert site.flops.recompute == L * (BLOCK - ELEMENTWISE)


def test_override_changes_recompute_not_forward():
    fn = make_scan("nothing_saveable")
    for spec in ("everything_saveable", "as_written"):
        site = only_site(remat_tui.analyze(fn, args=ARGS, sites={"block": spec}))
        assert site.override == spec
        assert site.flops == SiteFlops(forward=L * BLOCK, recompute=0)
    # The override gives what the hand-edited code gives.
    got = only_site(remat_tui.analyze(fn, args=ARGS, sites={1: "save_only_these_names('h')"}))
    edited = only_site(remat_tui.analyze(make_scan("save_only_these_names('h')"), args=ARGS))
    assert got.flops == edited.flops


def wide(W, x):
    return jnp.sin(x @ W)


def make_two_sizes(spec, second=None):
    """A checkpointed block on f32[2,4] and a wider one on f32[2,4] @ f32[4,16]."""
    small = ckpt(block, spec)
    big = ckpt(wide, spec if second is None else second)

    def loss(Ws, W_wide, x):
        return jnp.sum(big(W_wide, small(Ws[0], x)))

    return loss


WIDE = 2 * B * D * 16 + B * 16  # x @ W_wide, then sin on f32[2,16]
SIZES_ARGS = (ARGS[0], jnp.ones((D, 16)), ARGS[1])


def test_two_sites_of_different_sizes_get_their_own_figures():
    got = remat_tui.analyze(make_two_sizes("nothing_saveable"), args=SIZES_ARGS)
    small, big = got.sites
    assert (small.function, big.function) == ("block", "wide")
    assert small.flops == SiteFlops(forward=BLOCK, recompute=BLOCK)
    assert big.flops == SiteFlops(forward=WIDE, recompute=WIDE)
    assert big.flops.forward == body_flops(wide, SIZES_ARGS[1], jnp.ones((B, D)))
    # everything_saveable at one site: nothing recomputed there, the other unchanged.
    got = remat_tui.analyze(
        make_two_sizes("nothing_saveable"), args=SIZES_ARGS, sites={2: "everything_saveable"}
    )
    assert [s.flops.recompute for s in got.sites] == [BLOCK, 0]
    assert got.flops["recompute"] == BLOCK


def make_loop(spec, second=None):
    """One checkpointed function called at one line in a Python loop, over three
    layer widths: the sites share their source line and are told apart by order."""
    blk = ckpt(wide, spec)
    other = ckpt(wide, spec if second is None else second)

    def loss(Ws, x):
        for i, W in enumerate(Ws):
            x = (other if i == 1 else blk)(W, x)
        return jnp.sum(x)

    return loss


LOOP_ARGS = ([jnp.ones((4, 8)), jnp.ones((8, 16)), jnp.ones((16, 2))], jnp.ones((3, 4)))
LOOP = [2 * 3 * 4 * 8 + 3 * 8, 2 * 3 * 8 * 16 + 3 * 16, 2 * 3 * 16 * 2 + 3 * 2]


def test_sites_at_one_line_are_matched_in_order():
    got = remat_tui.analyze(make_loop("nothing_saveable"), args=LOOP_ARGS)
    assert len({s.source for s in got.sites}) == 1
    assert [s.flops.forward for s in got.sites] == LOOP
    assert [s.flops.recompute for s in got.sites] == LOOP
    # By id, at the middle one only: the override's figure lands on that site.
    got = remat_tui.analyze(
        make_loop("nothing_saveable"), args=LOOP_ARGS, sites={2: "everything_saveable"}
    )
    assert [s.flops.recompute for s in got.sites] == [LOOP[0], 0, LOOP[2]]
    edited = remat_tui.analyze(make_loop("nothing_saveable", "everything_saveable"), args=LOOP_ARGS)
    assert [s.flops for s in got.sites] == [s.flops for s in edited.sites]


FACTORIES = [
    make_scan,
    make_nested_scan,
    make_jit,
    make_cond,
    make_vmap,
    make_two_sites,
    make_nested_checkpoints,
]


@pytest.mark.parametrize("make", FACTORIES, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    "spec", ["nothing_saveable", "dots_saveable", "save_only_these_names('h')"]
)
def test_sites_sum_to_the_total_without_an_outer_policy(make, spec):
    got = remat_tui.analyze(make(spec), args=ARGS)
    assert got.sites and all(s.flops.recompute is not None for s in got.sites)
    assert sum_of_sites(got) == got.flops["recompute"] > 0


def test_nested_sites_each_get_their_innermost_work():
    got = remat_tui.analyze(make_nested_checkpoints("nothing_saveable"), args=ARGS)
    outer, inner = got.sites
    assert inner.function == "block" and inner.flops.recompute == BLOCK
    assert outer.flops.forward == BLOCK + body_flops(
        lambda W, h: jnp.sin(h) @ W, ARGS[0][0], ARGS[1]
    )
    assert 0 < outer.flops.recompute < got.flops["recompute"]
    assert outer.flops.recompute + inner.flops.recompute == got.flops["recompute"]


def test_outer_policy_work_stays_unattributed():
    got = remat_tui.analyze(make_scan("nothing_saveable"), args=ARGS, policy="dots_saveable")
    site = only_site(got)
    assert 0 < site.flops.recompute < got.flops["recompute"]


def test_transformer_site_against_its_block():
    targets = remat_tui.load_targets(example("transformer.py"))
    got = remat_tui.analyze(targets["scanned_checkpointed"])
    site = only_site(got)
    module = targets["scanned_checkpointed"].fn.__globals__
    layer = {k: jnp.zeros(s) for k, s in module["LAYER_SHAPES"].items()}
    x = jnp.zeros((module["BATCH"], module["SEQ"], module["D_MODEL"]))
    assert site.flops.forward == 24 * body_flops(module["block"], layer, x)
    assert site.flops.recompute == got.flops["recompute"]
    nothing = only_site(
        remat_tui.analyze(targets["scanned_checkpointed"], sites={1: "everything_saveable"})
    )
    assert nothing.flops.recompute == 0 and nothing.flops.forward == site.flops.forward


def test_json_site_object_has_flops():
    got = remat_tui.analyze(make_scan("nothing_saveable"), args=ARGS)
    assert got.to_dict()["sites"][0]["flops"] == {"forward": L * BLOCK, "recompute": L * BLOCK}


def test_reports_and_sidebar_show_site_flops():
    got = remat_tui.analyze(
        make_two_sizes("nothing_saveable"), args=SIZES_ARGS, sites={2: "everything_saveable"}
    )
    assert re.search(rf"^  2 .*{WIDE} FLOP +0 FLOP$", text.render(got), re.M)
    assert f"| {BLOCK} FLOP | {BLOCK} FLOP |" in markdown.render(got)
    assert f"<td>{WIDE} FLOP</td><td>0 FLOP</td></tr>" in html.render(got)
    small, big = got.sites
    assert site_label(small).splitlines()[1] == f"   ↻{BLOCK} FLOP nothing_saveable"
    assert site_label(big).splitlines()[1] == "   ↻0 FLOP everything_saveable"
    unknown = replace(big, flops=SiteFlops(WIDE, None))
    assert phrases.site_row(unknown)[-2:] == (f"{WIDE} FLOP", "unknown")
    assert "↻" not in site_label(unknown)
