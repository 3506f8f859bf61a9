"""Provides Compiles: the App's compile controller. While `p` is on
(`Wanted.compiled`), every analysis shown also has its step compiled for its
device in a worker of its own, and the compiled peak per device becomes the
status line's headline, the residual bytes beside it as "saved by autodiff".
While `x` is on too (`Wanted.measured`), the step is also run on the device
(core/xla/run/measure.py) and its measured time joins the headline, beside the
estimate.

A target loaded from a file compiles in a child process
(core/xla/run/process.py): its lowering does not share the app's GIL and
garbage collector, so keys are answered while it runs, and a newer request
kills it. A target given as a function object (no file to load it from in
the child) compiles in a thread; a newer request supersedes it there and its
answer is dropped. Results are kept per request key (target, Config,
reloads); CompileReady and CompileFailed go back to the App.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from textual.app import App
from textual.message import Message

from remat_tui.app.screens.failure import failure_words
from remat_tui.core.setup.config import RUNS  # `x`: timed runs of each step shown, after a warm-up
from remat_tui.core.units import human_bytes, human_seconds
from remat_tui.core.xla.run.process import CompileProcess
from remat_tui.errors import RematError
from remat_tui.report.memory import peak_make_up

if TYPE_CHECKING:
    from remat_tui.app.state.wanted import Wanted
    from remat_tui.core.xla.compile.compiled import Compiled
    from remat_tui.core.xla.run.measure import Measured
    from remat_tui.registry import Target


@dataclass
class CompileReady(Message):
    key: tuple
    compiled: Compiled
    measured: Measured | None = None  # when the step was run too


@dataclass
class CompileFailed(Message):
    key: tuple
    message: str


class Compiles:
    """Compiled numbers per request key, and the compile under way, for one App."""

    def __init__(self, app: App):
        self.app = app  # Textual's: run_worker, post_message, log
        self.known: dict[tuple, Compiled] = {}  # compiled numbers per request key
        self.measured: dict[tuple, Measured] = {}  # what running it took, per request key
        self.runs: int | None = None  # `x`: run each step this many times (None: don't)
        self.compiling: tuple | None = None  # the key being compiled
        self.started = 0.0
        self.process: CompileProcess | None = None  # started by the first `p`

    def switch(self, old: Wanted, new: Wanted, show_error: Callable[[str], object]) -> Wanted:
        """`p` or `x` turned on or off (`old` and `new`: what was and is
        wanted): say so, and start or stop compiling. Returns what is wanted
        now: `new`, or `new` without `x` where the device cannot run steps
        (`show_error` says why, in place)."""
        if new.measured and not self.measurable(new.device, show_error):
            new = replace(new, measured=False)
        self.runs = RUNS if new.measured else None
        if new.measured and not old.measured:
            self.app.notify(
                f"Running every analysis shown on {new.device} to time it "
                f"({RUNS} runs after a warm-up; x turns it off)"
            )
        elif new.compiled and not old.compiled:
            self.app.notify("Compiling every analysis shown (p turns it off); nothing is run")
        elif old.measured and not new.measured and new.compiled:
            self.app.notify("Measuring off: compiled numbers and the estimate stay")
        if new.compiled:
            if self.process is None:  # started by the first `p` (JAX imports there meanwhile)
                self.process = CompileProcess()
            self.process.start()
        else:
            self.compiling = None
            self.app.notify("Compiling off: residual bytes lead again")
        return new

    @staticmethod
    def measurable(device: str | None, show_error: Callable[[str], object]) -> bool:
        """Whether `device` can run steps; if not, `show_error` says why."""
        from remat_tui.core.xla.run.measure import check_measurable

        try:
            check_measurable(device, RUNS)
        except RematError as exc:
            show_error(exc.message)
            return False
        return True

    def compile(self, key: tuple, target: Target) -> None:
        """Compile `key` (and run it, while `x` is on) unless that is known
        already or under way."""
        done = self.known if self.runs is None else self.measured
        if key in done or key == self.compiling:
            return
        self.compiling, self.started = key, time.monotonic()
        self.app.run_worker(
            lambda: self._compile(key, target),
            thread=True,
            group="compile",
            exclusive=True,
            exit_on_error=False,
        )

    def _compile(self, key: tuple, target: Target) -> None:
        from remat_tui.app.arguments import prepared
        from remat_tui.core.trace.configured import Cancelled
        from remat_tui.core.xla.compile.costs import compile_answer
        from remat_tui.core.xla.run.measure import measure

        name, config, reloads = key
        runs = self.runs
        cancelled = lambda: key != self.compiling  # noqa: E731
        measured = None
        try:
            if target.file is not None and self.process is not None:
                result, measured = self.process.compile(
                    target.file, name, config, reloads, cancelled, runs, target.mesh
                )
            else:
                # The arguments the analysis was traced with (built for this device's
                # set: a sharded target's mesh spans a topology's chips), not a new build.
                ready = prepared(target, config.device)
                arguments = (ready.args, ready.kwargs)
                if runs is None:
                    result = compile_answer(
                        target,
                        config,
                        cancelled=cancelled,
                        arguments=arguments,
                        memory=True,  # the memory view (w), the status line's largest category
                    ).result
                else:
                    result, measured = measure(target, config, runs, cancelled, arguments=arguments)
        except Cancelled:
            return
        except RematError as exc:
            self.app.post_message(CompileFailed(key, exc.message))
            return
        except Exception as exc:  # our bug: say so in place, keep going
            self.app.log.error(traceback.format_exc())
            self.app.post_message(CompileFailed(key, f"while compiling: {failure_words(exc)}"))
            return
        self.app.post_message(CompileReady(key, result, measured))

    def ready(self, message: CompileReady) -> None:
        self.known[message.key] = message.compiled
        if message.measured is not None:
            self.measured[message.key] = message.measured
        if message.key == self.compiling:
            self.compiling = None

    def failed(self, message: CompileFailed) -> bool:
        """Whether the failure is the compile under way's (then the App says so)."""
        if message.key != self.compiling:
            return False
        self.compiling = None
        return True

    def close(self) -> None:
        """At exit: the child process goes with the app."""
        self.compiling = None
        if self.process is not None:
            self.process.close()

    def known_of(self, key: tuple | None) -> Compiled | None:
        """The compiled numbers for `key`, when known (None: no request)."""
        return self.known.get(key) if key is not None else None

    def measured_words(self, key: tuple | None, estimate: dict | None) -> str | None:
        """`measured 1.21 ms (est. ~1.10 ms)` while `x` is on and it was run;
        why not, where it could not be; None otherwise."""
        if self.runs is None:
            return None
        m = self.measured.get(key) if key is not None else None
        est = f"est. ~{human_seconds(estimate['seconds'])}" if estimate else None
        if m is None:
            return est and f"measuring… ({est})"
        if m.error:
            return f"not measured: {m.error.splitlines()[0]}"
        assert m.min_seconds is not None  # run, and no error
        return f"measured {human_seconds(m.min_seconds)}" + (f" ({est})" if est else "")

    def headline(self, key: tuple | None, show_timings: bool) -> str | None:
        """`peak 1.2 GiB/device (compiled, ...)` when known, `compiling 3.1 s`
        while it runs, else None."""
        known = self.known_of(key)
        if known is not None and not known.fits:
            needed = (
                f": needs {human_bytes(known.needed_bytes)}/device" if known.needed_bytes else ""
            )
            return f"does not fit {known.device}{needed} (compiled)"
        if known is not None:
            step = "training step" if known.step == "train" else "gradient alone"
            make_up = ""
            if known.memory and known.memory["peak_bytes"]:
                make_up = ", " + peak_make_up(known.memory)
            return f"peak {human_bytes(known.peak_bytes)}/device (compiled, {step}){make_up}"
        if key is not None and key == self.compiling:
            elapsed = time.monotonic() - self.started
            clock = f" {elapsed:.1f} s" if show_timings else ""
            return f"compiling{clock}…"
        return None
