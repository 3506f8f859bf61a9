"""Contract 8, first part: a configuration that does not fit is an answer.
compare and suggest go on past compiles that run out of memory (rows that do
not fit) and past other compile failures (rows with an error), and suggest
compiles only what can change its answer, giving the answer compiling
everything gives."""

import pytest
from test_compare import ARGS, LOSS

import remat_tui
from remat_tui.core.search.suggest import pipeline
from remat_tui.core.setup import policies
from remat_tui.core.trace.configured import as_target
from remat_tui.core.units import human_bytes
from remat_tui.core.xla.compile import costs as compiled_lib
from remat_tui.core.xla.compile.compiled import does_not_fit
from remat_tui.core.xla.estimates import step_time
from remat_tui.errors import RematError
from remat_tui.report import comparisons as comparison_reports
from remat_tui.report import suggest as suggest_reports

OOM = "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO temporaries (9.00G) exceeds available HBM (8.00G)."  # noqa: E501
SPECS = policies.builtin_specs()


@pytest.fixture
def failing_for(monkeypatch):
    """Make compiles of the given outer policies run out of memory (or fail)."""

    def install(out_of_memory=(), broken=()):
        real = compiled_lib.compile_answer  # what compile_answer and the searches call

        def compile_answer(target, config, cancelled=None, **kw):
            policy = dict(config.sites).get("block", config.policy)  # at the site, else outer
            if out_of_memory == "all" or policy in out_of_memory:
                oom = does_not_fit(OOM, "cpu:0", 1, 0.1)
                return compiled_lib.CompiledStep(oom, None, None, [], [])
            if policy in broken:
                raise RematError("compiling failed: XLA says: INTERNAL: a bug")
            return real(target, config, cancelled, **kw)

        monkeypatch.setattr(compiled_lib, "compile_answer", compile_answer)

    return install


def test_compare_goes_on_past_rows_that_do_not_fit_or_fail(failing_for):
    failing_for(out_of_memory={"nothing_saveable"}, broken={"dots_saveable"})
    c = remat_tui.compare(LOSS, args=ARGS, policies=SPECS, compiled=True)
    assert [r.config.policy for r in c.rows] == [policies.parse(s).canonical for s in SPECS]
    by = {r.config.policy: r for r in c.rows}
    oom, broken = by["nothing_saveable"], by["dots_saveable"]
    assert not oom.fits and oom.compiled.needed_bytes == 9 * 2**30 and not oom.pareto
    assert broken.error and "a bug" in broken.error and not broken.fits and not broken.pareto
    assert any(r.pareto for r in c.rows)
    others = [r for r in c.rows if r not in (oom, broken)]
    assert all(r.fits and r.compiled.peak_bytes > 0 for r in others)
    cells = {r.config.policy: comparison_reports.row_cells(r) for r in c.rows}
    assert cells["nothing_saveable"][5] == f"✗ needs {human_bytes(9 * 2**30)}"
    assert cells["dots_saveable"][5] == "compile failed"
    assert (
        "does not fit cpu:0" in cells["nothing_saveable"][comparison_reports.COLUMNS.index("notes")]
    )
    d = c.to_dict()["rows"]
    assert d[2]["compiled"]["fits"] is False and d[3]["error"].endswith("a bug")


@pytest.fixture(scope="module")
def all_compiled():
    """Every candidate suggest considers, each compiled (suggest's own
    compile_all): the answers of the ordered search are checked against it."""
    return pipeline.suggest(as_target(LOSS, ARGS, None), 2**40, compiled=True,
                            compile_all=True).rows  # fmt: skip


def cheapest_that_fits(rows, budget):
    """The oracle, by hand: the least estimated step time (recompute FLOPs
    where there is no estimate) among rows that fit, host bytes then memory
    breaking ties, an offload slower than recomputing only if nothing else fits."""
    fitting = [r for r in rows if r.fits and r.weighed_bytes <= budget]
    # Never an offload with no host memory to go to (the CPU's compile has none).
    fitting = [r for r in fitting if not r.offload_without_host]
    fitting = [r for r in fitting if not r.offload_slower] or fitting

    def cost(r):
        return (r.time.seconds if r.time else r.recompute_flops, r.host_bytes, r.weighed_bytes)

    return min(fitting, key=cost)


@pytest.mark.parametrize("which", ["smallest", "middle", "largest"])
def test_suggest_compiles_only_what_can_change_its_answer(all_compiled, which):
    peaks = sorted({r.weighed_bytes for r in all_compiled})
    budget = {"smallest": peaks[0], "middle": peaks[len(peaks) // 2], "largest": peaks[-1]}[which]
    got = remat_tui.suggest(LOSS, budget, args=ARGS, compiled=True)
    want = cheapest_that_fits(all_compiled, budget)
    assert got.fits and got.exact
    assert (got.found.config, got.found.weighed_bytes) == (want.config, want.weighed_bytes)
    assert got.searched == len(all_compiled)
    assert got.compiled_count + got.skipped == len(all_compiled)
    assert got.compiled_count == len(got.rows)
    # On CPU the chip is measured, so rows carry a step-time estimate, and
    # every configuration not compiled could not beat the answer even at its
    # lower bound (what the search knew before compiling it).
    assert got.found.time is not None
    chip = step_time.chip_of("cpu:0")
    compiled = {r.config for r in got.rows}
    for r in all_compiled:
        if r.config not in compiled:
            if r.offload_slower:  # left out while a configuration that recomputes fits
                assert not got.found.offload_slower
                continue
            if r.offload_without_host:  # never the answer, so never compiled
                continue
            bound = step_time.lower_bound(chip, r.step_flops, r.host_bytes)
            assert (bound, r.host_bytes) >= (got.found.time.seconds, got.found.host_bytes)
            assert r.time is None or r.time.seconds >= bound
    d = got.to_dict()
    assert d["compiled_count"] == got.compiled_count and d["skipped"]["count"] == got.skipped


@pytest.fixture
def compute_bound_cpu(monkeypatch):
    """The measured CPU with memory traffic free: every estimate is its
    compute and host time, so the bounds known before compiling are tight
    (this toy model is otherwise bound by memory traffic on CPU, where the
    bounds skip nothing: exact, but no faster than compiling everything)."""
    import dataclasses

    from remat_tui.core.xla.estimates import chips

    fast = dataclasses.replace(chips.measured_cpu(), memory_bandwidth=float("inf"))
    monkeypatch.setattr(step_time, "chip_of", lambda device: fast)
    compiled_lib.clear_cache()
    yield fast
    compiled_lib.clear_cache()


def test_suggest_skips_compiles_that_cannot_beat_the_answer(compute_bound_cpu, monkeypatch):
    # As on a chip with host memory: the offloads compete (on the CPU's own
    # compile they are left out uncompiled, tests/unit/test_offload_without_host.py).
    monkeypatch.setattr(
        "remat_tui.core.xla.compile.host_memory.offloads_to_host", lambda device: True
    )
    target = as_target(LOSS, ARGS, None)
    got = pipeline.suggest(target, 2**40, compiled=True)
    everything = pipeline.suggest(target, 2**40, compiled=True, compile_all=True)
    assert got.found.config == cheapest_that_fits(everything.rows, 2**40).config
    assert got.fits and got.skipped > 0 and "estimated slower on cpu" in got.skipped_why
    assert got.found.time.seconds == min(
        r.time.seconds for r in got.rows if r.time and not r.offload_slower
    )
    text = suggest_reports.render_suggest(got, "text")
    # (with the programs among them, where some configurations lower to one)
    assert f"{got.compiled_count} compiled" in text and f", {got.skipped} not compiled" in text


def test_without_a_known_chip_suggest_orders_by_recompute(monkeypatch):
    monkeypatch.setattr(step_time, "chip_of", lambda device: None)
    compiled_lib.clear_cache()
    got = remat_tui.suggest(LOSS, 2**40, args=ARGS, compiled=True)
    assert got.best.time is None and "recomputes more" in got.skipped_why
    assert got.best.recompute_flops == min(r.recompute_flops for r in got.rows)


def test_suggest_goes_on_when_the_least_recompute_does_not_fit(failing_for):
    # The configurations that recompute least do not fit: the answer is the
    # next one that does, not an error that ends the search.
    failing_for(out_of_memory={"as_written", "everything_saveable"}, broken={"dots_saveable"})
    got = remat_tui.suggest(LOSS, 2**40, args=ARGS, compiled=True)
    assert got.fits and got.best.fits
    chosen = dict(got.best.config.sites).get("block", got.best.config.policy)
    assert chosen not in ("as_written", "everything_saveable", "dots_saveable")
    assert any(not r.fits for r in got.rows)


def test_suggest_when_nothing_fits_the_device(failing_for):
    failing_for(out_of_memory="all")
    got = remat_tui.suggest(LOSS, 2**40, args=ARGS, compiled=True)
    assert not got.fits and not got.best.fits
    # Each had to be tried, but the offloads the CPU's compile has no host memory for.
    homeless = sum(1 for r in got.rows if r.offload_without_host)
    assert got.compiled_count == got.searched - got.skipped and homeless == 0
    assert got.skipped and "which cpu:0's compile does not have" in got.skipped_why
    text = suggest_reports.render_suggest(got, "text")
    assert "nothing fits" in text and "does not fit the device either" in text


def test_suggest_progress_counts_to_what_it_says_it_searched():
    # Progress said [n/33] while the answer said "all 34 configurations".
    seen = []
    got = pipeline.suggest(
        as_target(LOSS, ARGS, None),
        2**40,
        compiled=True,
        progress=lambda i, n, config, stage="": seen.append((i, n, stage)),
    )
    analysing = [(i, n) for i, n, stage in seen if stage != "compiling"]
    compiling = [(i, n) for i, n, stage in seen if stage == "compiling"]
    assert {n for _, n in analysing} == {got.searched}
    assert [i for i, _ in analysing] == list(range(got.searched))
    assert len(compiling) == got.compiled_count


def test_a_budget_above_the_device_is_said_to_be(failing_for):
    """XLA said the device has 8 GiB (a compile that did not fit): a 1 TiB
    budget is above it, and the suggestion says so."""
    # (dots_saveable at the site: nothing_saveable there is the code as
    # written, merged with it before anything compiles)
    failing_for(out_of_memory={"dots_saveable"})
    got = pipeline.suggest(as_target(LOSS, ARGS, None), 2**40, compiled=True,
                           compile_all=True)  # fmt: skip
    assert got.device_memory == 8 * 2**30 and got.budget_above_device
    assert got.to_dict()["budget_above_device"] is True
    text = suggest_reports.render_suggest(got, "text")
    assert "above the 8.0 GiB" in text
    fits = pipeline.suggest(as_target(LOSS, ARGS, None), 2**20, compiled=True,
                            compile_all=True)  # fmt: skip
    assert not fits.budget_above_device


def test_a_budget_below_the_arguments_and_outputs_compiles_one(all_compiled):
    """Every configuration holds the same arguments and returns the same
    gradients: a budget below those bytes cannot be met, said after one compile."""
    target = as_target(LOSS, ARGS, None)
    base = compiled_lib.compile_answer(target, remat_tui.core.setup.config.Config()).result
    floor = base.argument_bytes + base.output_bytes - base.alias_bytes
    got = pipeline.suggest(target, floor - 1, compiled=True)
    assert not got.fits and got.compiled_count == 1 and got.skipped == got.searched - 1
    assert "none can fit" in got.skipped_why and human_bytes(floor) in got.skipped_why
    # and that is a proof: nothing can fit, over the whole space (not "nothing found")
    assert got.exact and got.search.bound == float("inf") and got.search.proven
    assert (
        "nothing in the space can fit the budget (proven over the whole space)"
        in suggest_reports.render_suggest(got, "text")
    )
    # Every candidate compiled (the module's compile_all: a row's peak and
    # whether it fits the device do not depend on the budget) is above it.
    assert len(all_compiled) == got.searched
    assert not any(r.fits and r.weighed_bytes <= floor - 1 for r in all_compiled)
