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
from remat_tui.core.xla import chips, step_time

CHIP = chips.Chip("test chip", peak_flops=1e12, memory_bandwidth=1e11, host_bandwidth=1e10,
                  memory_bytes=2**34, sources=("https://example.com",))  # fmt: skip


def test_the_roofline_adds_host_time_to_the_slower_of_compute_and_memory():
    t = step_time.estimate(CHIP, flops=2e12, host_bytes=5e9, bytes_accessed=1e11, xla_flops=2e12)
    assert t.compute_seconds == pytest.approx(2.0)
    assert t.memory_seconds == pytest.approx(1.0)
    assert t.host_seconds == pytest.approx(1.0)  # 5 GB out and 5 GB back at 10 GB/s
    assert t.seconds == pytest.approx(3.0) and t.model == "roofline"
    # XLA counts a loop body once: its bytes are scaled by the same undercount.
    scanned = step_time.estimate(CHIP, flops=2e12, host_bytes=0, bytes_accessed=1e11,
                                 xla_flops=5e11)  # fmt: skip
    assert scanned.memory_seconds == pytest.approx(4.0) and scanned.seconds == pytest.approx(4.0)
    assert step_time.lower_bound(CHIP, 2e12, 5e9) == pytest.approx(3.0)


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
        t = row.time
        assert t["chip"] == "cpu" and t["model"] == "roofline"
        assert t["compute_seconds"] == pytest.approx(row.step_flops / cpu.peak_flops)
        assert t["host_seconds"] == pytest.approx(2 * row.host_bytes / cpu.host_bandwidth)
        assert t["seconds"] >= step_time.lower_bound(cpu, row.step_flops, row.host_bytes)
        assert row.to_dict()["time"] == t


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
    from remat_tui.report import costs as cost_reports

    c = remat_tui.compare(LOSS, args=ARGS, compiled=True, policies=["nothing_saveable"])
    text = cost_reports.render_compare(c, "text")
    assert "est. step" in text and "roofline" in text
