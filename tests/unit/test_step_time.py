"""Contract 8, time instead of FLOPs: the roofline estimate of a step, the
bound suggest orders its compiles by, and offloads that cost more time than
the recompute they save."""

import dataclasses

import pytest
from test_compare import ARGS, LOSS

import remat_tui
from remat_tui.core.search.compare import compare
from remat_tui.core.setup.config import Config
from remat_tui.core.trace.analysis import costs_view
from remat_tui.core.trace.configured import as_target
from remat_tui.core.trace.traced import trace_config
from remat_tui.core.xla.estimates import chips, step_time

CHIP = chips.Chip("test chip", peak_flops=1e12, memory_bandwidth=1e11, host_bandwidth=1e10,
                  memory_bytes=2**34, sources=("https://example.com",),
                  transcendentals_per_second=1e10)  # fmt: skip
CPU_LIKE = dataclasses.replace(CHIP, overlaps_memory=False)


def counts(flops, transcendentals=0.0, bytes_accessed=0.0, loops=False):
    return step_time.StepCounts(flops, transcendentals, bytes_accessed, loops)


def test_the_roofline_has_four_parts():
    # remat-tui counts 2e12 FLOPs, 1e10 of them transcendentals (XLA counts
    # those apart); 1e11 bytes; 5 GB offloaded.
    t = step_time.estimate(CHIP, 2e12, 5e9, counts(1.99e12, 1e10, 1e11))
    assert t.compute_seconds == pytest.approx(1.99)
    assert t.transcendental_seconds == pytest.approx(1.0)  # 1e10 at 1e10/s, not at 1e12/s
    assert t.memory_seconds == pytest.approx(1.0)
    assert t.host_seconds == pytest.approx(1.0)  # 5 GB out and 5 GB back at 10 GB/s
    # An accelerator overlaps memory with the arithmetic; a CPU adds them.
    assert t.seconds == pytest.approx(1.99 + 1.0 + 1.0) and t.model == "roofline"
    cpu = step_time.estimate(CPU_LIKE, 2e12, 5e9, counts(1.99e12, 1e10, 1e11))
    assert cpu.seconds == pytest.approx(1.99 + 1.0 + 1.0 + 1.0)
    # Memory-bound: memory replaces the arithmetic.
    slow = step_time.estimate(CHIP, 2e12, 0, counts(1.99e12, 1e10, 1e12))
    assert slow.seconds == pytest.approx(10.0)


def test_xlas_counts_are_scaled_only_in_a_program_with_loops():
    # XLA counts a loop body once: 4x fewer FLOPs than remat-tui's count.
    looped = step_time.estimate(CHIP, 2e12, 0, counts(4.9e11, 1e10, 1e11, loops=True))
    assert looped.loop_scale == pytest.approx(4.0)
    assert looped.transcendentals == pytest.approx(4e10) and looped.bytes_accessed == 4e11
    assert looped.memory_seconds == pytest.approx(4.0)
    # Without loops, fewer FLOPs in XLA's count are work it removed, not
    # iterations: nothing is scaled, and remat-tui's count (less the
    # transcendentals) stands for the compute, so the bound holds.
    merged = step_time.estimate(CHIP, 2e12, 0, counts(4.9e11, 1e10, 1e11))
    assert merged.loop_scale == 1.0 and merged.memory_seconds == pytest.approx(1.0)
    assert merged.flops == pytest.approx(2e12 - 1e10)
    # More FLOPs in XLA's count (work its fusions do twice) are taken as they are.
    fused = step_time.estimate(CHIP, 2e12, 0, counts(3e12, 0.0, 0.0))
    assert fused.compute_seconds == pytest.approx(3.0)


@pytest.mark.parametrize("chip", [CHIP, CPU_LIKE])
@pytest.mark.parametrize(
    "xla", [counts(1.99e12, 1e10, 1e11), counts(1e9, 5e11, 0.0), counts(5e11, 0, 0, True)]
)
def test_the_estimate_is_never_below_the_bound_known_before_compiling(chip, xla):
    bound = step_time.lower_bound(chip, 2e12, 5e9)
    assert step_time.estimate(chip, 2e12, 5e9, xla).seconds >= bound * (1 - 1e-12)
    assert bound == pytest.approx(3.0)


def test_every_table_chip_computes_transcendentals_no_faster_than_flops():
    """What keeps the bound below the estimate; and every rate is cited."""
    for chip in chips.CHIPS.values():
        assert 0 < chip.transcendentals_per_second < chip.peak_flops, chip.name
        assert "ranscendentals" in chip.notes, chip.name
    cpu = chips.measured_cpu()
    assert 0 < cpu.transcendentals_per_second < cpu.peak_flops


@pytest.fixture(scope="module")
def compiled_rows():
    return compare(LOSS, args=ARGS, compiled=True).rows


def test_a_rows_step_flops_are_its_full_analysis(compiled_rows):
    """The transposition is counted once and shared: each row's forward +
    transposition + recompute is what the full trace of its configuration counts."""
    target = as_target(LOSS, ARGS, None)
    for row in compiled_rows[:: max(len(compiled_rows) // 6, 1)]:
        full = costs_view(trace_config(target, row.config))
        assert row.step_flops == full.flops["forward"] + full.flops["backward"], row.config


def test_every_compiled_row_has_an_estimate_on_the_measured_cpu(compiled_rows):
    cpu = chips.measured_cpu()
    for row in compiled_rows:
        t, c = row.time.to_dict(), row.compiled.to_dict()  # as the JSON says them
        assert t["chip"] == "cpu" and t["model"] == "roofline"
        # XLA's own counts, each at its rate, scaled by how much XLA's count of
        # the 3-layer scan falls short of remat-tui's (its body counted once).
        assert c["loops"]
        xla = c["flops"] + (c["transcendentals"] or 0)
        assert t["loop_scale"] == pytest.approx(row.step_flops / xla) and t["loop_scale"] > 1.5
        assert t["transcendentals"] == pytest.approx((c["transcendentals"] or 0) * t["loop_scale"])
        assert t["transcendental_seconds"] == pytest.approx(
            t["transcendentals"] / cpu.transcendentals_per_second
        )
        assert t["flops"] >= c["flops"] * t["loop_scale"] * (1 - 1e-9)
        assert t["compute_seconds"] == pytest.approx(t["flops"] / cpu.peak_flops)
        assert t["memory_seconds"] == pytest.approx(
            c["bytes_accessed"] * t["loop_scale"] / cpu.memory_bandwidth
        )
        # Offloaded bytes cross to host and back, but not on the CPU, whose
        # compile keeps them in device memory (tests/unit/test_offload_without_host.py).
        moved = 0 if row.offload_without_host else row.host_bytes
        assert t["host_seconds"] == pytest.approx(2 * moved / cpu.host_bandwidth)
        parts = ("compute_seconds", "transcendental_seconds", "memory_seconds", "host_seconds",
                 "overhead_seconds")  # fmt: skip
        assert t["seconds"] == pytest.approx(sum(t[k] for k in parts))  # the CPU adds them
        assert t["overhead_seconds"] == cpu.overhead_seconds > 0
        assert t["seconds"] >= step_time.lower_bound(cpu, row.step_flops, moved)
        assert row.to_dict()["time"] == t and row.cost_source == "estimate"


def tpu_or_skip(device="tpu:v5e:2x2"):
    from remat_tui.core.setup.devices import resolve_device
    from remat_tui.errors import RematError

    try:
        resolve_device(device)
    except RematError as exc:
        pytest.skip(f"no deviceless TPU here ({exc.message})")


def test_an_offload_slower_than_recomputing_is_never_starred():
    """On a v5e, sending `h` and `g` (a sine and a tanh of an 8-wide dot) to
    host and back costs far more than recomputing them: those rows are marked,
    noted, and off the front."""
    tpu_or_skip()
    rows = compare(LOSS, args=ARGS, device="tpu:v5e:2x2").rows
    offloading = [r for r in rows if r.host_bytes]
    assert offloading and all(r.offload_slower and not r.pareto for r in offloading)
    assert all(any("tpu v5e" in n and "to host and back" in n for n in r.notes) for r in offloading)
    assert all(not r.offload_slower for r in rows if not r.host_bytes)


def test_an_offload_that_beats_recomputing_can_be_starred(monkeypatch):
    """With a host link far faster than the chip computes, offloads that
    spare recompute are worth it; the only ones still marked spare none."""
    fast_link = dataclasses.replace(CHIP, host_bandwidth=1e18)
    monkeypatch.setattr(step_time, "chip_of", lambda device: fast_link)
    # A chip with host memory to offload to (the CPU's compile has none).
    monkeypatch.setattr(
        "remat_tui.core.xla.compile.host_memory.offloads_to_host", lambda device: True
    )
    rows = compare(LOSS, args=ARGS).rows
    offloading = [r for r in rows if r.host_bytes]
    assert any(not r.offload_slower for r in offloading)
    for row in offloading:
        if row.offload_slower:
            assert any("offloading gains nothing" in n for n in row.notes)


def test_the_counterpart_of_an_offload_recomputes_what_it_offloaded():
    offload = Config.make("save_and_offload_only_these_names(names_which_can_be_saved=['h'], "
                          "names_which_can_be_offloaded=['g'], offload_src='device', "
                          "offload_dst='pinned_host')")  # fmt: skip
    assert offload.recomputing_offloads().policy == "save_only_these_names('h')"
    dots = Config.make("offload_dot_with_no_batch_dims('device', 'pinned_host')")
    assert dots.recomputing_offloads().policy == "nothing_saveable"
    assert Config.make("dots_saveable").recomputing_offloads().policy == "dots_saveable"


def test_suggest_and_compare_report_the_estimate_as_an_estimate():
    from remat_tui.report import comparisons as comparison_reports

    c = remat_tui.compare(LOSS, args=ARGS, compiled=True, policies=["nothing_saveable"])
    text = comparison_reports.render_compare(c, "text")
    assert "est. step" in text and "roofline" in text
