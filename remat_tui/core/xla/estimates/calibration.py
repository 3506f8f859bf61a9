"""Provides the CPU's calibration: its rates (`xla.estimates.cpu_rates`) measured
once per machine and kept, so that the same program gets the same step-time
estimate run after run. Measured afresh in every process, on a shared
machine, the matmul's rate came out between 96 and 160 GFLOP/s in four
runs, and one program's estimate between 0.14 and 0.22 ms in three.

Kept in remat-tui's cache folder, `$XDG_CACHE_HOME/remat-tui/cpu-rates.json`
(else `~/.cache/remat-tui/cpu-rates.json`), one entry per machine: the CPU's
model, its logical cores and the jax and jaxlib versions (XLA's code for the
kernels changes with them), with the date and how the rates were measured. A
home folder shared by machines of several kinds keeps one entry for each (the
KEEP most recent). `--recalibrate` on the commands that estimate (and
`remat_tui.calibrate_cpu()`) measures again and replaces this machine's entry.

A file that cannot be read, or holds no entry for this machine, is measured
for and rewritten; a folder that cannot be written keeps the rates for this
process only, and the estimate says why. Writes are atomic (a temporary file
renamed over the file), so two processes calibrating at once leave one whole
file.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from functools import cache
from pathlib import Path

from remat_tui.core.xla.compile.store import cache_folder
from remat_tui.core.xla.estimates import cpu_rates

FILE_NAME = "cpu-rates.json"
FORMAT = 1  # the file's layout; another is read as no calibration
KEEP = 16  # machines kept in one file, the most recently calibrated


@dataclass(frozen=True)
class Machine:
    """What a calibration holds for: the rates of another CPU, core count or
    XLA are another machine's."""

    cpu: str  # the CPU's model name
    cores: int  # logical cores
    jax: str
    jaxlib: str

    def label(self) -> str:
        return f"{self.cpu}, {self.cores} cores, jax {self.jax}, jaxlib {self.jaxlib}"


@dataclass(frozen=True)
class Calibration:
    """The CPU's rates, where and when they were measured, and where they are kept."""

    rates: cpu_rates.Rates
    machine: Machine
    calibrated_at: str  # ISO 8601, UTC, to the second
    method: str  # how the rates were measured (cpu_rates.DESCRIPTION)
    measuring_seconds: float  # how long measuring took
    file: str | None  # where the calibration is kept; None: in this process only
    not_kept: str = ""  # why it is not kept, where it is not

    @property
    def source(self) -> str:
        """`calibrated on this machine 2026-11-26 14:03 UTC (kept in ...)`."""
        when = self.calibrated_at[:16].replace("T", " ")
        kept = f"kept in {_home_relative(self.file)}" if self.file else ""
        where = kept or f"for this process only: {self.not_kept}"
        return f"calibrated on this machine {when} UTC ({where})"

    def to_dict(self) -> dict:
        """The estimate's `rates` in the JSON report (Contract 8's `time`)."""
        return {
            "source": self.source,
            "calibrated_at": self.calibrated_at,
            "method": self.method,
            "machine": asdict(self.machine),
            "file": self.file,
            "measuring_seconds": self.measuring_seconds,
            "flops": self.rates.flops,
            "bandwidth": self.rates.bandwidth,
            "transcendentals_per_second": self.rates.transcendentals,
            "overhead_seconds": self.rates.overhead,
        }


def _home_relative(path: str) -> str:
    """`~/.cache/remat-tui/cpu-rates.json` for a path in the user's home."""
    home = os.path.join(os.path.expanduser("~"), "")
    return "~/" + path[len(home) :] if path.startswith(home) else path


def rates_file() -> Path:
    return cache_folder() / FILE_NAME


@cache
def this_machine() -> Machine:
    import jax
    import jaxlib

    return Machine(_cpu_model(), os.cpu_count() or 1, jax.__version__, jaxlib.__version__)


def _cpu_model() -> str:
    """The CPU's model name: /proc/cpuinfo's on Linux, else what the platform says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Processor", "cpu model") and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def stored_or_measured() -> Calibration:
    """This machine's calibration as kept, or, where none is, measured now and kept."""
    stored = _read(rates_file(), this_machine())
    return stored if stored is not None else calibrate()


def calibrate() -> Calibration:
    """The rates measured now, kept as this machine's calibration (replacing any)."""
    start = time.perf_counter()
    rates = cpu_rates.measure()
    seconds = time.perf_counter() - start
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    path = rates_file()
    calibration = Calibration(
        rates=rates,
        machine=this_machine(),
        calibrated_at=now.isoformat().replace("+00:00", "Z"),
        method=cpu_rates.DESCRIPTION,
        measuring_seconds=round(seconds, 3),
        file=str(path),
    )
    problem = _write(path, calibration)
    if problem:
        return replace(calibration, file=None, not_kept=problem)
    return calibration


def _read(path: Path, machine: Machine) -> Calibration | None:
    """The calibration kept in `path` for `machine`, or None (none, or unreadable)."""
    for entry in _entries(path):
        try:
            if Machine(**entry["machine"]) != machine:
                continue
            return Calibration(
                rates=cpu_rates.Rates(**entry["rates"]),
                machine=machine,
                calibrated_at=str(entry["calibrated_at"]),
                method=str(entry["method"]),
                measuring_seconds=float(entry["measuring_seconds"]),
                file=str(path),
            )
        except (KeyError, TypeError, ValueError):
            continue  # an entry of another layout: as if absent
    return None


def _entries(path: Path) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            kept = json.load(f)
    except (OSError, ValueError):
        return []
    if not isinstance(kept, dict) or kept.get("format") != FORMAT:
        return []
    entries = kept.get("calibrations")
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _write(path: Path, calibration: Calibration) -> str:
    """Keep `calibration` in `path`, replacing its machine's entry; '' if kept,
    else why not."""
    entry = {
        "machine": asdict(calibration.machine),
        "calibrated_at": calibration.calibrated_at,
        "method": calibration.method,
        "measuring_seconds": calibration.measuring_seconds,
        "rates": asdict(calibration.rates),
    }
    others = [e for e in _entries(path) if e.get("machine") != entry["machine"]]
    kept = {"format": FORMAT, "calibrations": [*others[-(KEEP - 1) :], entry]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".cpu-rates-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(kept, f, indent=1)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    return ""
