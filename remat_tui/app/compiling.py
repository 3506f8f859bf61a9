"""Provides Compiling: `p` turns automatic compiling on or off; while on,
every analysis shown also has its gradient compiled for its device (never
run), in a worker of its own, and the compiled peak per device becomes the
status line's headline, the residual bytes beside it as "saved by autodiff".

A target loaded from a file compiles in a child process
(core/xla/compile_process.py): its lowering does not share the app's GIL and
garbage collector, so keys are answered while it runs, and a newer request
kills it. A target given as a function object (no file to load it from in
the child) compiles in a thread; a newer request supersedes it there and its
answer is dropped. Results are cached per target, Config and reload. A mixin
of RematApp (handlers named on_<message>).
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass

from textual import work
from textual.message import Message
from textual.widgets import Static

from remat_tui.core.xla.compile_process import CompileProcess
from remat_tui.errors import RematError
from remat_tui.report.memory import largest_category
from remat_tui.report.units import human_bytes


@dataclass
class CompileReady(Message):
    key: tuple
    compiled: object


@dataclass
class CompileFailed(Message):
    key: tuple
    message: str


class Compiling:
    """Automatic compiling of the shown configuration (mixed into RematApp)."""

    auto_compile = False
    compiling: tuple | None = None  # the key being compiled
    compile_started = 0.0
    compile_process: CompileProcess | None = None  # started by the first `p`

    def action_toggle_compile(self) -> None:
        self.auto_compile = not self.auto_compile
        if self.auto_compile:
            self.notify("Compiling every analysis shown (p turns it off); nothing is run")
            if self.compile_process is None:
                self.compile_process = CompileProcess()
            self.compile_process.start()  # JAX imports there while the app goes on
            self.compile_shown()
        else:
            self.compiling = None
            self.notify("Compiling off: residual bytes lead again")
            if self.shown is not None:
                self.update_status(self.shown)

    def compile_shown(self) -> None:
        """Compile what is shown, unless compiling is off or it is known already."""
        a = self.shown
        if not self.auto_compile or a is None or self.target is None:
            return
        key = (self.target.name, a.config, self.reloads)
        if key in self.compiled or key == self.compiling:
            return
        self.compiling, self.compile_started = key, time.monotonic()
        self.compile_worker(key, self.target)

    @work(thread=True, group="compile", exclusive=True, exit_on_error=False)
    def compile_worker(self, key: tuple, target) -> None:
        from remat_tui.app.arguments import prepared
        from remat_tui.core.trace.configured import Cancelled
        from remat_tui.core.xla.compiled import compile_costs

        name, config, reloads = key
        cancelled = lambda: key != self.compiling  # noqa: E731
        try:
            if target.file is not None and self.compile_process is not None:
                result = self.compile_process.compile(target.file, name, config, reloads, cancelled)
            else:
                # The arguments the analysis was traced with (built for this device's
                # set: a sharded target's mesh spans a topology's chips), not a new build.
                ready = prepared(target, config.device)
                result = compile_costs(
                    target,
                    config,
                    cancelled=cancelled,
                    arguments=(ready.args, ready.kwargs),
                    memory=True,  # the memory view (w) and the status line's largest category
                )
        except Cancelled:
            return
        except RematError as exc:
            self.post_message(CompileFailed(key, exc.message))
            return
        except Exception as exc:  # our bug: say so in place, keep going
            self.log.error(traceback.format_exc())
            self.post_message(CompileFailed(key, f"internal error while compiling: {exc!r}"))
            return
        self.post_message(CompileReady(key, result))

    def stop_compiling(self) -> None:
        """At exit: the child process goes with the app."""
        self.compiling = None
        if self.compile_process is not None:
            self.compile_process.close()

    def on_compile_ready(self, message: CompileReady) -> None:
        self.compiled[message.key] = message.compiled
        if message.key == self.compiling:
            self.compiling = None
        if self.shown is not None and self.key_of(self.shown) == message.key:
            self.update_status(self.shown)

    def on_compile_failed(self, message: CompileFailed) -> None:
        if message.key == self.compiling:
            self.compiling = None
            self.show_error(
                f"compiling failed: {message.message}",
                hint="the analysis shown is this configuration's; only its compile "
                "failed (p turns compiling off)",
            )
            if self.shown is not None:  # the status line said "compiling…" until now
                self.update_status(self.shown)

    def key_of(self, a) -> tuple | None:
        return (self.target.name, a.config, self.reloads) if self.target else None

    def compiled_headline(self, a) -> str | None:
        """`peak 1.2 GiB/device (compiled)` when known, `compiling 3.1 s` while
        it runs, None when compiling is off."""
        if not self.auto_compile:
            return None
        key = self.key_of(a)
        known = self.compiled.get(key)
        if known is not None and not known.fits:
            needed = (
                f": needs {human_bytes(known.needed_bytes)}/device" if known.needed_bytes else ""
            )
            return f"does not fit {known.device}{needed} (compiled)"
        if known is not None:
            step = "training step" if known.step == "train" else "gradient alone"
            mostly = ""
            if known.memory and known.memory["peak_bytes"]:
                category = largest_category(known.memory)
                share = known.memory["by_category"][category] / known.memory["peak_bytes"]
                mostly = f", mostly {category} ({share:.0%})"
            return f"peak {human_bytes(known.peak_bytes)}/device (compiled, {step}){mostly}"
        if key == self.compiling:
            elapsed = time.monotonic() - self.compile_started
            clock = f" {elapsed:.1f} s" if self.show_timings else ""
            return f"compiling{clock}…"
        return None

    def tick_compile(self) -> None:
        """The compile clock, while a compile for what is shown runs."""
        if self.compiling is not None and self.shown is not None and self.pending is None:
            if self.key_of(self.shown) == self.compiling:
                self.query_one("#status", Static).update(self.status_text(self.shown), layout=False)
