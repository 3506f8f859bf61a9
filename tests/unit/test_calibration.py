"""Issue 31, item 5: the CPU's rates are calibrated once per machine and kept
(core/xla/estimates/calibration.py), so that the same program gets the same estimate in
two runs; `--recalibrate` and `remat_tui.calibrate_cpu()` measure again; every
estimate says where its rates came from."""

import json
import os
import subprocess
import sys
from dataclasses import asdict, replace

import pytest
from conftest import example

import remat_tui
from remat_tui.core.xla.estimates import calibration, chips, cpu_rates, step_time

MLP = example("mlp.py")
RATES = cpu_rates.Rates(flops=2e11, bandwidth=3e10, transcendentals=2e9, overhead=4e-6)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache folder of this test's own, no CPU figures read yet in this
    process, and the number of times the CPU was measured."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(chips, "_cpu", None)
    measured = []

    def measure():
        measured.append(True)
        return replace(RATES, flops=RATES.flops * len(measured))  # each measurement differs

    monkeypatch.setattr(cpu_rates, "measure", measure)
    return measured


def kept() -> list[dict]:
    with open(calibration.rates_file()) as f:
        return json.load(f)["calibrations"]


def run_cli(*args, env):
    exe = os.path.join(os.path.dirname(sys.executable), "remat-tui")
    proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_the_cpu_is_measured_once_and_its_calibration_kept(cache):
    cpu = chips.measured_cpu()
    assert cache == [True]
    assert cpu.peak_flops == RATES.flops
    [entry] = kept()
    assert entry["machine"] == asdict(calibration.this_machine())
    assert entry["rates"]["flops"] == RATES.flops
    assert entry["method"] == cpu_rates.DESCRIPTION
    assert entry["calibrated_at"].endswith("Z")  # UTC, to the second

    chips._cpu = None  # as in another process: read back, not measured
    again = chips.measured_cpu()
    assert cache == [True]
    assert again.peak_flops == cpu.peak_flops
    assert again.calibration == cpu.calibration


def test_every_estimate_says_where_its_rates_came_from(cache):
    counts = step_time.StepCounts(1e9, 1e6, 1e8, False)
    cpu = step_time.estimate(chips.measured_cpu(), 1e9, 0, counts).to_dict()["rates"]
    assert cpu["source"].startswith("calibrated on this machine ")
    assert cpu["calibrated_at"][:10] in cpu["source"]
    assert cpu["file"] == str(calibration.rates_file()) and cpu["file"] in cpu["source"]
    assert cpu["method"] == cpu_rates.DESCRIPTION
    assert cpu["machine"]["cores"] == os.cpu_count()
    assert cpu["flops"] == RATES.flops

    tpu = step_time.estimate(chips.CHIPS["tpu v5e"], 1e9, 0, counts).to_dict()["rates"]
    assert tpu["source"].startswith("published figures for tpu v5e")
    assert tpu["references"] == list(chips.CHIPS["tpu v5e"].sources)


def test_a_file_in_the_home_folder_is_named_from_there(cache, tmp_path, monkeypatch):
    """The words say `~/...`; the JSON's `file` is the whole path."""
    monkeypatch.setenv("HOME", str(tmp_path))
    source = chips.measured_cpu().rates_source()
    assert "(kept in ~/cache/remat-tui/cpu-rates.json)" in source["source"]
    assert source["file"] == str(tmp_path / "cache" / "remat-tui" / "cpu-rates.json")


def test_recalibrating_measures_again_and_replaces_this_machines_entry(cache):
    first = chips.measured_cpu()
    rates = remat_tui.calibrate_cpu()
    assert cache == [True, True]
    assert rates["flops"] == 2 * RATES.flops != first.peak_flops
    assert chips.measured_cpu().peak_flops == rates["flops"]  # estimates from here on
    [entry] = kept()
    assert entry["rates"]["flops"] == rates["flops"]


def test_another_jax_is_another_machine(cache, monkeypatch):
    """XLA's code for the kernels changes with jax and jaxlib: a calibration
    made under another version is not read; both are kept."""
    here = calibration.this_machine()
    chips.measured_cpu()
    newer = replace(here, jax="99.0", jaxlib="99.0")
    monkeypatch.setattr(calibration, "this_machine", lambda: newer)
    chips._cpu = None
    assert chips.measured_cpu().calibration.machine == newer
    assert cache == [True, True]
    assert [e["machine"]["jax"] for e in kept()] == [here.jax, "99.0"]


def test_a_file_that_cannot_be_read_is_measured_for_and_rewritten(cache):
    path = calibration.rates_file()
    path.parent.mkdir(parents=True)
    path.write_text("{ not json")
    assert chips.measured_cpu().calibration.file == str(path)
    assert cache == [True]
    assert len(kept()) == 1


def test_a_folder_that_cannot_be_written_keeps_the_rates_for_this_process(
    cache, tmp_path, monkeypatch
):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # its remat-tui folder cannot be made
    cpu = chips.measured_cpu()
    assert cpu.calibration.file is None
    source = cpu.rates_source()
    assert source["file"] is None
    assert "for this process only: cannot write" in source["source"]
    assert chips.measured_cpu() is cpu  # measured once all the same


def test_two_runs_give_the_same_estimate(remat_tui_cmd, tmp_path):
    """The issue's bar: the same program's estimate within 2% in two runs on
    the same machine. Measured afresh in each run it came out 0.14 to 0.22 ms here (a
    shared machine); with the calibration kept it is the same, to the bit."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    args = ("report", MLP, "--policy", "dots_saveable", "--compiled", "--format", "json")
    first = json.loads(run_cli(*args, env=env).stdout)["time"]
    second = json.loads(run_cli(*args, env=env).stdout)["time"]
    assert abs(second["seconds"] - first["seconds"]) <= 0.02 * first["seconds"]
    assert second == first  # rates and parts alike, the rates' source included
    assert first["rates"]["source"].startswith("calibrated on this machine")


def test_recalibrate_on_the_command_line(remat_tui_cmd, tmp_path):
    """A kept calibration is what the estimate uses, until --recalibrate."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    machine = calibration.this_machine()
    path = tmp_path / "cache" / "remat-tui" / calibration.FILE_NAME
    path.parent.mkdir(parents=True)
    slow = {"flops": 1e6, "bandwidth": 1e6, "transcendentals": 1e6, "overhead": 1e-3}
    entry = {"machine": asdict(machine), "calibrated_at": "2020-01-02T03:04:05Z",
             "method": "by hand", "measuring_seconds": 0.0, "rates": slow}  # fmt: skip
    path.write_text(json.dumps({"format": calibration.FORMAT, "calibrations": [entry]}))

    args = ("report", MLP, "--compiled", "--format", "json")
    kept_rates = json.loads(run_cli(*args, env=env).stdout)["time"]["rates"]
    assert kept_rates["flops"] == 1e6 and kept_rates["calibrated_at"] == "2020-01-02T03:04:05Z"

    proc = run_cli("report", MLP, "--compiled", "--recalibrate", env=env)
    assert "remat-tui: calibrated this CPU's rates in" in proc.stderr
    assert f"kept in {path}" in proc.stderr
    assert "est. step's rates" in proc.stdout and "calibrated on this machine" in proc.stdout
    [entry] = json.loads(path.read_text())["calibrations"]
    assert entry["rates"]["flops"] > 1e6 and entry["calibrated_at"] != "2020-01-02T03:04:05Z"
    assert entry["method"] == cpu_rates.DESCRIPTION


def test_the_reports_say_where_the_rates_came_from():
    """The compare and suggest legend and fit's (text, Markdown, HTML and
    the notebook's), for the CPU's calibration and for a chip of the table."""
    from types import SimpleNamespace

    from remat_tui.report.comparisons import time_legend
    from remat_tui.report.fit import legend

    source = "calibrated on this machine 2026-01-02 03:04 UTC (kept in /c/cpu-rates.json)"

    def estimate(chip: str, rates: dict) -> step_time.StepTime:
        return step_time.StepTime(1.0, 1.0, 0.0, 0.0, 0.0, chip, rates=rates)

    cpu = estimate("cpu", {"source": source, "calibrated_at": "2026-01-02T03:04:05Z"})
    row = SimpleNamespace(time=cpu, measured=None)
    said = f"{source}; --recalibrate measures again."
    assert f"Its rates: {said}" in time_legend([row])
    assert f"The estimate's rates: {said}" in legend(SimpleNamespace(rows=[row], optimized=False))

    tpu = estimate("tpu v5e", chips.CHIPS["tpu v5e"].rates_source())
    words = time_legend([SimpleNamespace(time=tpu, measured=None)])
    assert "Its rates: published figures for tpu v5e" in words and "--recalibrate" not in words
