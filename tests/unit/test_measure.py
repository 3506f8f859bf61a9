"""Contract 9's measured mode: each compiled step run on its local device and
timed; measured times rank; what cannot be measured says so, in the API and
the CLI alike. Small programs only: each compiles in well under a second."""

import json
import re
import subprocess

import jax
import jax.numpy as jnp
import pytest

import remat_tui
from remat_tui.core.search.compare import mark_pareto
from remat_tui.core.search.rows import Row
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.policies import PolicySpec
from remat_tui.core.xla.compile.costs import CompiledStep
from remat_tui.core.xla.estimates.step_time import StepTime
from remat_tui.core.xla.run import measure as measure_lib
from remat_tui.core.xla.run.measure import Measured
from remat_tui.errors import RematError
from remat_tui.registry import Target

FIVE = [
    "as_written",
    "nothing_saveable",
    "dots_saveable",
    "everything_saveable",
    "dots_with_no_batch_dims_saveable",
]


def mlp(ws, x):
    for w in ws:
        x = jnp.tanh(x @ w)
    return jnp.mean(x**2)


ARGS = ([jax.ShapeDtypeStruct((128, 128), jnp.float32)] * 3,
        jax.ShapeDtypeStruct((64, 128), jnp.float32))  # fmt: skip


def target(fn=mlp, args=ARGS) -> Target:
    return Target(fn=fn, name=fn.__name__, args=args)


def test_a_step_is_run_and_timed():
    compiled, m = measure_lib.measure(target(), Config(), runs=3)
    assert compiled.fits and m.ok and m.runs == 3
    assert 0 < m.min_seconds <= m.median_seconds
    # The CPU backend keeps no memory statistics, and the row says so.
    assert m.peak_bytes is None and "no memory statistics" in m.peak_note
    assert m.to_dict()["min_seconds"] == m.min_seconds


def test_a_training_step_carries_its_donated_state():
    optax = pytest.importorskip("optax")
    t = Target(fn=mlp, name="mlp", args=ARGS, param_positions=(0,), optimizer=optax.adam(1e-3))
    compiled, m = measure_lib.measure(t, Config(), runs=3)
    assert compiled.step == "train" and m.ok and m.runs == 3


def test_real_example_arrays_are_used_as_they_are():
    seen = []

    def f(x):
        jax.debug.callback(lambda v: seen.append(float(v)), x[0])
        return jnp.sum(jnp.sin(x))

    t = Target(fn=f, name="f", args=(jnp.full((8,), 3.0),))
    _, m = measure_lib.measure(t, Config(), runs=2)
    assert m.ok and seen and set(seen) == {3.0}


def test_compare_ranks_by_the_measured_time():
    c = remat_tui.compare(target(), policies=FIVE, measure=True, runs=2)
    for row in c.rows:
        assert row.cost_source == "measured" and row.time is not None
        assert row.cost[0] == row.measured.min_seconds
        d = row.to_dict()
        assert d["cost_source"] == "measured" and d["measured"]["runs"] == 2
    assert any(r.pareto for r in c.rows)


def test_measured_times_decide_the_front_over_the_estimate():
    """Two rows of equal memory: the estimate calls A faster, the runs B."""

    def row(policy, estimate, measured):
        r = Row(Config(PolicySpec(policy, declared=True)), "", 100, 0, 0, 1, ())
        r.time = StepTime(estimate, estimate, 0.0, 0.0, 0.0, "cpu")
        r.measured = Measured(
            runs=5, min_seconds=measured, median_seconds=measured, peak_bytes=None
        )
        return r

    a, b = row("a", 1.0, 3.0), row("b", 2.0, 2.0)
    mark_pareto([a, b])
    assert b.pareto and not a.pareto
    a.measured = b.measured = None  # no runs: the estimate decides
    mark_pareto([a, b])
    assert a.pareto and not b.pareto and a.cost_source == "estimate"


def test_analyze_measures_on_request():
    a = remat_tui.analyze(target(), policy="nothing_saveable", measure=True, runs=2)
    assert a.compiled is not None and a.time is not None
    assert a.measured["runs"] == 2 and a.measured["min_seconds"] > 0
    assert a.to_dict()["measured"] == a.measured


def test_suggest_chooses_by_the_measured_time():
    s = remat_tui.suggest(target(), "1GiB", measure=True, runs=2)
    fitting = [r for r in s.rows if r.fits and r.weighed_bytes <= s.budget]
    assert s.fits and s.measured_count == len(fitting)
    assert all(r.cost_source == "measured" for r in fitting)
    assert s.found.measured.min_seconds == min(
        r.measured.min_seconds for r in fitting if not r.offload_slower
    )


def test_a_peak_above_the_device_is_refused_before_running(monkeypatch):
    monkeypatch.setattr(measure_lib, "device_memory", lambda dev: 1024)
    _, m = measure_lib.measure(target(), Config(), runs=2)
    assert not m.fits and m.runs == 0 and "exceeds the device's" in m.error


def test_a_run_out_of_memory_is_a_row(monkeypatch):
    real = measure_lib.compile_step

    def failing(*args, **kwargs):
        step = real(*args, **kwargs)

        def run(*_):
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate")

        return CompiledStep(step.result, run, step.lowered, step.leaves, step.abstract)

    monkeypatch.setattr(measure_lib, "compile_step", failing)
    c = remat_tui.compare(target(), policies=FIVE[:2], measure=True, runs=2)
    assert len(c.rows) == 2
    for row in c.rows:
        assert not row.fits and not row.pareto and not row.measure_failed
        assert row.measured.error.startswith("did not fit when run")


def test_the_backends_peak_is_kept_only_when_it_is_this_steps():
    cpu = jax.devices("cpu")[0]
    assert measure_lib._peak({"peak_bytes_in_use": 10}, {"peak_bytes_in_use": 50}, cpu) == (
        50, None)  # fmt: skip
    peak, note = measure_lib._peak({"peak_bytes_in_use": 90}, {"peak_bytes_in_use": 90}, cpu)
    assert peak is None and "earlier peak" in note


def test_no_runs_and_deviceless_topologies_are_refused():
    with pytest.raises(RematError, match="at least one timed run"):
        measure_lib.check_measurable(None, 0)
    try:
        from remat_tui.core.setup.devices import resolve_device

        resolve_device("tpu:v5e:2x2")
    except RematError:
        pytest.skip("no deviceless TPU here")
    with pytest.raises(RematError, match="cannot be measured"):
        measure_lib.check_measurable("tpu:v5e:2x2", 5)


# --- the command line ---------------------------------------------------------------

RAISES_WHEN_RUN = """
import jax, jax.numpy as jnp
import numpy as np
import remat_tui

def host(x):
    raise ValueError("the host callback failed")

@jax.custom_vjp
def checked(x):
    return jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

checked.defvjp(lambda x: (checked(x), None), lambda _, g: (g,))

@remat_tui.target(args=lambda: (jax.ShapeDtypeStruct((8, 8), jnp.float32),))
def loss(x):
    return jnp.sum(checked(jnp.sin(x)))
"""


def run(cmd, *args):
    return subprocess.run([cmd, *args], capture_output=True, text=True)


def test_compare_measure_prints_both_times_and_ranks_by_the_measured(remat_tui_cmd):
    from conftest import example

    proc = run(remat_tui_cmd, "compare", example("mlp.py"), "--compiled", "--measure",
               "--runs", "2", *[f"--policy={p}" for p in FIVE])  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    head = proc.stdout.splitlines()[2]
    assert "est. step" in head and "measured" in head
    assert "#1 " in proc.stdout and "#5 " in proc.stdout
    # The measure page's promise: the minimum and the median of each row, and
    # why the CPU gives no measured peak.
    assert "measured: the fastest and the median of 2 runs" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if re.search(r"#\d+ \d", line)]
    assert len(rows) == 5 and all("(median " in line for line in rows)
    assert "No measured peak: the cpu backend reports no memory statistics" in proc.stdout
    assert "left)" in proc.stderr or "[5/5]" in proc.stderr  # progress per configuration
    proc = run(remat_tui_cmd, "compare", example("mlp.py"), "--measure", "--runs", "2",
               "--policy", "nothing_saveable", "--format", "json")  # fmt: skip
    (row,) = json.loads(proc.stdout)["rows"]
    assert row["cost_source"] == "measured" and row["measured"]["runs"] == 2
    assert set(row["time"]) >= {"compute_seconds", "transcendental_seconds", "memory_seconds",
                                "host_seconds"}  # fmt: skip


def test_bad_measure_input_exits_2_with_a_message(remat_tui_cmd, write_target):
    from conftest import example

    proc = run(remat_tui_cmd, "compare", example("mlp.py"), "--measure", "--runs", "0")
    assert proc.returncode == 2 and "--runs 0" in proc.stderr and "Traceback" not in proc.stderr
    proc = run(remat_tui_cmd, "compare", example("mlp.py"), "--runs", "3")
    assert proc.returncode == 2 and "--runs is for --measure" in proc.stderr
    # A step that raises when run: the report is written with every row, then exit 2.
    path = write_target(RAISES_WHEN_RUN)
    proc = run(remat_tui_cmd, "compare", path, "--measure", "--runs", "1",
               "--policy", "nothing_saveable", "--format", "json")  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    (row,) = json.loads(proc.stdout)["rows"]
    assert row["measured"]["error"].startswith("raised when run")
    assert "raised when run on the device" in proc.stderr and "Traceback" not in proc.stderr


def test_measure_on_a_topology_is_one_clear_line(remat_tui_cmd):
    from conftest import example

    from remat_tui.core.setup.devices import libtpu_installed

    if not libtpu_installed():
        pytest.skip("no libtpu here")
    proc = run(remat_tui_cmd, "compare", example("mlp.py"), "--measure",
               "--device", "tpu:v5e:2x2")  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("remat-tui: error")]
    assert len(errors) == 1 and "cannot be measured" in errors[0]
