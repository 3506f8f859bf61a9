"""Provides `Progress`, the commands' progress lines on stderr: one per
configuration (`[3/12] compiling nothing_saveable (about 40 s left)`, the
time left from the pace so far) and, for fit, one per batch tried
(`Progress.batch`).

Imports only the standard library and light modules at module level.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from remat_tui.core.units import count

if TYPE_CHECKING:
    from remat_tui.core.search.fit.results import FitProgress
    from remat_tui.core.setup.config import Config


class Progress:
    """The progress lines of one command run."""

    def __init__(self) -> None:
        self.began = time.perf_counter()  # the command's search began: fit's lines count from it
        self.start: float | None = None  # the first configuration began: the pace counts from it
        self.total: int | None = None  # the configurations the command will make

    def __call__(self, i: int, total: int, config: Config, stage: str = "") -> None:
        """A line per configuration: `[3/12] compiling nothing_saveable (about 40 s left)`."""
        self.total = total
        now = time.perf_counter()
        if self.start is None or i == 0:
            self.start = now
        what = f"{stage} " if stage else ""
        left = ""
        if i > 0:
            seconds = (now - self.start) / i * (total - i)
            left = f" (about {seconds:.0f} s left)" if seconds >= 1 else ""
        print(
            f"remat-tui: [{i + 1}/{total}] {what}{config.label()}{left}",
            file=sys.stderr,
            flush=True,
        )

    def batch(self, p: FitProgress) -> None:
        """A line per batch fit tries: `[2/15] fit nothing_saveable: fits 64, not 128 ->
        trying 96 (7 compiles, 41 s)`; for --optimize, `[search 3] fit --optimize: ...`."""
        from remat_tui.report.fit import progress_count, progress_line

        seconds = time.perf_counter() - self.began
        same = f", {p.reused} answered without compiling" if p.reused else ""
        print(
            f"remat-tui: [{progress_count(p)}] {progress_line(p)} "
            f"({count(p.compiles, 'compile')}{same}, {seconds:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
