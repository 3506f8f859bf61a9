"""The zoo tier's runs of the CLI, its budgets, its invariants on a
command's exit (Contract 16: exit 0 or 1 with an answer, or 2 with one line
naming the cause; never a traceback of remat-tui's own), and what the
command tests (test_every_command.py, test_zoo_suggest.py, test_zoo_fit.py)
share: the commands as they run them and the figures they compare.

Every command runs as a user runs it, `python -m remat_tui ...` in a process
of its own, its compile store one per test session (shared by the session's
xdist workers): the same program compiled by two commands is compiled once,
and every figure is still checked against JAX's own compile by hand.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import cache

import pytest

from zoo import MODELS, Model
from zoo import oracle as hand

OURS = re.compile(r'File "[^"]*[/\\]remat_tui[/\\]')
TIMEOUT = 900  # seconds: a command that takes longer is hung, for models this small


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def command(self) -> str:
        """The command to reproduce it (with the tier's environment)."""
        return "python -m remat_tui " + " ".join(self.args)

    def json(self) -> dict:
        return json.loads(self.stdout)

    def first_error(self) -> str:
        """The first line that says what went wrong: remat-tui's error line,
        else a traceback's last line, else stderr's last line."""
        lines = self.stderr.splitlines()
        said = [ln for ln in lines if ln.startswith("remat-tui: error:")]
        if said:
            return said[0]
        if "Traceback (most recent call last)" in self.stderr:
            raised = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception)\b", ln)]
            return raised[-1] if raised else lines[-1]
        return lines[-1] if lines else "(nothing on stderr)"


@cache
def store_folder() -> str:
    """One compile store for the test session: its xdist workers share it
    (PYTEST_XDIST_TESTRUNUID is the session's), a run without xdist has its own."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run:
        folder = os.path.join(tempfile.gettempdir(), f"remat-tui-zoo-{run}")
        os.makedirs(folder, exist_ok=True)
        return folder
    return tempfile.mkdtemp(prefix="remat-tui-zoo-")


@cache
def out_folder() -> str:
    return tempfile.mkdtemp(prefix="remat-tui-zoo-out-")


@cache
def cli(*args: str) -> Run:
    """`python -m remat_tui ARGS`, run once per test module's process."""
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = store_folder()
    env["REMAT_TUI_NO_CACHE"] = "0"
    env.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "remat_tui", *args],
            capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=out_folder(),
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        stderr += f"\nremat-tui: error: (the tier) no answer after {TIMEOUT} s: hung"
        return Run(args, -9, "", stderr, TIMEOUT)
    return Run(args, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


def assert_clean(run: Run, statuses: tuple[int, ...] = (0, 1)) -> None:
    """Contract 16 on one command's exit: no traceback of ours ever; exit 0
    or 1 with no traceback at all; exit 2 with one line naming the cause."""
    where = f"\n  {run.command}\n  -> exit {run.returncode}: {run.first_error()}"
    ours = [ln.strip() for ln in run.stderr.splitlines() if OURS.search(ln)]
    assert not ours, f"a traceback of remat-tui's own ({ours[-1]}){where}"
    if run.returncode in (0, 1):
        assert "Traceback (most recent call last)" not in run.stderr, f"a traceback{where}"
    elif run.returncode == 2:
        said = [ln for ln in run.stderr.splitlines() if ln.startswith("remat-tui: error:")]
        assert len(said) == 1 and said[0][len("remat-tui: error:") :].strip(), (
            f"exit 2 without one line naming the cause{where}"
        )
    assert run.returncode in statuses, f"exit {run.returncode}, wanted {statuses}{where}"


# ---- budgets, from JAX's own numbers ---------------------------------------------


@cache
def residual_budget(model: Model) -> int:
    """Halfway between what JAX saves as written and under an outer
    nothing_saveable, one device's (Contract 17), so the search must choose
    (as written where that is the smaller)."""
    args = hand.example_args(model)
    written = hand.saved_bytes(model.target_fn(), args, per_device=True)
    nothing = hand.saved_bytes(
        hand.outer(model.target_fn(), "nothing_saveable", {}), args, per_device=True
    )
    return written if written <= nothing else (written + nothing) // 2


@cache
def compiled_budget(model: Model) -> int:
    """Halfway between the compiled peaks as written and under an outer
    nothing_saveable (as written where that is the smaller)."""
    args = hand.example_args(model)
    written = hand.hand_peak(model.target_fn(), args)
    nothing = hand.hand_peak(hand.outer(model.target_fn(), "nothing_saveable", {}), args)
    return written if written <= nothing else (written + nothing) // 2


@cache
def fit_budget(model: Model) -> int:
    """Half as much again as the compiled peak as written at the example's batch."""
    return hand.hand_peak(model.target_fn(), hand.example_args(model)) * 3 // 2


# ---- what the command tests share -------------------------------------------------

MEASURES = ("residual", "compiled")


def each_model():
    return pytest.mark.parametrize("model", MODELS, ids=[m.id for m in MODELS])


def expect(model: Model, test: str, measure: str, holds: bool, said: str) -> None:
    """Assert `holds`, unless `model.known` says the defect it checks is
    known there: then it must still show (an xfail), and a fix shows as a
    failure asking for the entry to go."""
    reason = model.known.get((test, measure))
    if reason is None:
        assert holds, said
    elif holds:
        pytest.fail(f"{model.id}: the known defect '{reason}' is gone: drop it from `known`")
    else:
        pytest.xfail(f"known: {reason}")


def applies(model: Model, command: str) -> None:
    if command in model.skip:
        pytest.skip(f"{model.id} leaves {command} out: {model.skip[command]}")


def answered(run: Run) -> dict:
    """The JSON of a command that must have answered; else the test fails
    saying how it ended."""
    if run.returncode not in (0, 1) or not run.stdout.strip():
        pytest.fail(f"no answer: {run.command}\n  -> exit {run.returncode}: {run.first_error()}")
    return run.json()


# ---- the runs (each once per test module's process) ---------------------------------


def baseline(model: Model) -> str:
    return os.path.join(out_folder(), f"{model.id}.report.json")


def report(model: Model) -> Run:
    return cli("report", model.spec, "--compiled", "--format", "json", "-o", baseline(model))


def suggest(model: Model, measure: str) -> Run:
    if measure == "compiled":
        budget = compiled_budget(model)
        return cli("suggest", model.spec, "--budget", str(budget), "--compiled", "--format", "json")
    return cli("suggest", model.spec, "--budget", str(residual_budget(model)), "--format", "json")


def fit(model: Model, optimize: bool) -> Run:
    batch = hand.example_batch(model) or 2
    m = str(model.multiple)
    if optimize:  # the exact search at the example's batch alone: suggest --compiled's work
        return cli("fit", model.spec, "--optimize", "--budget", str(compiled_budget(model)),
                   "--max-batch", str(batch), "--multiple", m, "--format", "json")  # fmt: skip
    return cli("fit", model.spec, "--budget", str(fit_budget(model) if model.scales else 2**20),
               "--max-batch", str(2 * batch), "--multiple", m,
               "--policy", "as_written", "--policy", "nothing_saveable",
               "--format", "json")  # fmt: skip


def figure(measure: str, row: dict) -> int:
    """The figure JAX's own numbers give for an answer: the compiled peak,
    or every byte saved, one device's (device and host: JAX's list does not
    say which; Contract 17)."""
    if measure == "compiled":
        return row["compiled"]["peak_bytes"]
    return row["device_bytes"] + row["host_bytes"]


def judged(measure: str, row: dict) -> int:
    """The figure a budget is judged by (Contract 17: one device's): the
    compiled peak per device, or the residual bytes one device holds."""
    if measure == "compiled":
        return row["compiled"]["peak_bytes"]
    return row["device_bytes"] + row["host_bytes"]


def by_hand(measure: str, fn, args) -> int:
    if measure == "compiled":
        return hand.hand_peak(fn, args)
    return hand.saved_bytes(fn, args, per_device=True)
