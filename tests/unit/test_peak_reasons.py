"""Why a compiled peak held while the residual bytes moved, said from the data
(issue 30, item 10): `remat-tui memory examples/mlp.py --policy
nothing_saveable` used to print "peak unchanged ... -100%" with no reason,
and list a `residual` at the peak under a policy that saves nothing. The
premises are checked against JAX: its own compiles of the two programs, and
print_saved_residuals, at test time."""

import io
import re
from contextlib import redirect_stdout
from pathlib import Path

import jax
import pytest
from jax.ad_checkpoint import print_saved_residuals

import remat_tui
from remat_tui.core.model import MEMORY_CATEGORIES as CATEGORIES
from remat_tui.core.setup.loading import resolve_arguments
from remat_tui.core.units import human_bytes
from remat_tui.core.xla.buffers.peak_notes import kept_by_xla, peak_note
from remat_tui.report import render

MLP = str(Path(__file__).parent.parent.parent / "examples" / "mlp.py")


def _xla_flops(fn, args) -> float:
    costs = jax.jit(jax.value_and_grad(fn)).lower(*args).compile().cost_analysis()
    costs = costs[0] if isinstance(costs, (list, tuple)) else costs
    return costs["flops"]


@pytest.fixture(scope="module")
def nothing_on_the_mlp():
    target = remat_tui.load_targets(MLP)["loss"]
    return target, remat_tui.analyze(
        target, policy="nothing_saveable", compiled=True, vs_written=True
    )


def test_the_mlp_under_nothing_saveable_says_why_its_peak_held(nothing_on_the_mlp):
    target, a = nothing_on_the_mlp
    args, _ = resolve_arguments(target)
    checkpointed = jax.checkpoint(target.fn, policy=jax.checkpoint_policies.nothing_saveable)
    said = a.compiled.memory["explanation"]
    head, _, why = said.partition(": ")
    assert head == "peak unchanged against the code as written while the residual bytes moved -100%"
    assert why, "the peak held: the note says why"
    # The premise, by JAX's own compiles: whether the two programs do the same
    # work (JAX 0.10's CPU compile merges the recomputation into the forward
    # work; 0.12's keeps it, and the recomputed values take the residuals' place).
    written, nothing = _xla_flops(target.fn, args), _xla_flops(checkpointed, args)
    merged = nothing == pytest.approx(written, rel=0.01)
    said_merged = "merged the recomputation the policy asks for into the forward work" in why
    assert said_merged == merged, why
    if merged:
        assert re.search(r"arguments and outputs, which no remat policy changes, are \d+% of", why)
    else:
        assert re.search(r"residual buffers? \(.*\) at the peak became \d+ recomputed", why), why


def test_the_residual_at_the_peak_under_nothing_saveable_is_explained(nothing_on_the_mlp):
    target, a = nothing_on_the_mlp
    args, _ = resolve_arguments(target)
    out = io.StringIO()
    with redirect_stdout(out):
        print_saved_residuals(
            jax.checkpoint(target.fn, policy=jax.checkpoint_policies.nothing_saveable), *args
        )
    # JAX saves the arguments alone; XLA keeps forward values all the same.
    assert all("from the argument" in line for line in out.getvalue().splitlines())
    assert a.totals.bytes_excluding_arguments == 0
    memory = a.compiled.memory
    kept = [b for b in memory["at_peak"] if b["category"] == "residual"]
    if not kept:  # this JAX's XLA keeps no forward value to the backward part: nothing to say
        assert "holds forward values XLA keeps" not in (memory["explanation"] or "")
        return
    assert memory["by_category"]["residual"] == sum(b["bytes"] for b in kept)
    size = human_bytes(memory["by_category"]["residual"])
    assert (
        f"The residual at the peak ({len(kept)} buffers, {size}) holds forward values"
        in (memory["explanation"])
    )
    assert "where autodiff saves none besides the arguments" in memory["explanation"]
    text = render(a, "text")
    assert memory["explanation"] in text


def _memory(peak_step=5, backward_from=3, **held):
    at_peak = [{"bytes": n, "category": c, "source": None} for c, n in held.items()]
    return {
        "peak_bytes": sum(held.values()),
        "peak_step": peak_step,
        "backward_from": backward_from,
        "at_peak": at_peak,
        "by_category": dict.fromkeys(CATEGORIES, 0) | held,
    }


def test_a_peak_in_the_forward_part_says_so():
    before = _memory(peak_step=2, backward_from=6, argument=500, residual=300, temporary=200)
    after = _memory(peak_step=2, backward_from=6, argument=500, residual=300, temporary=200)
    said = peak_note(before, after, 1000, 0, "X")
    assert "the peak is in the forward part (step 2; the backward part starts at step 6)" in said
    assert "where argument holds 50% of it" in said
    # XLA's FLOPs of the two programs within 1%: the recomputation was merged away.
    assert "merged the recomputation" in peak_note(before, after, 1000, 0, "X", (100.0, 100.5))
    assert "merged the recomputation" not in peak_note(before, after, 1000, 0, "X", (100.0, 130))


def test_the_kept_residual_is_said_only_beyond_what_autodiff_saves():
    memory = _memory(argument=500, residual=300)
    assert kept_by_xla(memory, 300) is None
    assert kept_by_xla(_memory(argument=500), 0) is None
    assert "where autodiff saves 100 B besides the arguments" in kept_by_xla(memory, 100)


def test_the_peak_row_says_what_the_figure_is(nothing_on_the_mlp):
    """On CPU the peak is the sum of XLA's sizes, and the row says so (on TPU
    it says HBM's live peak: tests/unit/test_compiled.py)."""
    _, a = nothing_on_the_mlp
    c = a.compiled
    assert c.peak_source == "sum" and not c.alias_bytes
    assert c.peak_bytes == c.argument_bytes + c.output_bytes + c.temp_bytes
    assert "(device memory: arguments + outputs + temporaries; the figure budgets are" in render(
        a, "text"
    )
