"""Provides Verifying: the App's verify controller (`a`, issue 43, Contract
18). `a` runs the configuration shown (outer policy, site overrides, names,
structure) and the code as written on the shown device with the same inputs
(core/xla/verify/bisect.py's `verify_explained`), in a worker of its own,
and the verdict is said above the panes: the same gradients or not, the
leaves bitwise equal, the worst leaf against its tolerance and, where they
differ, the decision that moves them.

A verify compiles and runs the step several times (and where the gradients
differ, a few subsets of the configuration more), so it runs in a thread
and says what it is doing, with a clock. `a` again while it runs cancels it,
and so does asking for another configuration: its verdict would be stale as
it came. Threads cannot be killed: the core polls `cancelled` between its
compiles and runs, and an answer that is no longer wanted is dropped.
Verdicts are kept per request key (target, Config, reloads): coming back
to a configuration verified shows its verdict again; another configuration
shows the last verdict marked stale. A verify that raises (a step that fails
to compile or run) is said in place; the analysis shown stays.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.app import App
from textual.message import Message

from remat_tui.app.screens.failure import failure_words

if TYPE_CHECKING:
    from remat_tui.core.setup.config import Config
    from remat_tui.core.xla.verify.runs import Verification
    from remat_tui.registry import Target


@dataclass
class VerifyProgress(Message):
    """The verify of `key` began a stage (words: "running ... on cpu:0")."""

    key: tuple
    what: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, VerifyProgress) and message.key == self.key


@dataclass
class VerifyDone(Message):
    key: tuple
    verification: Verification


@dataclass
class VerifyFailed(Message):
    key: tuple
    message: str


class Verifying:
    """Verdicts per request key, and the verify under way, for one App."""

    def __init__(self, app: App):
        self.app = app  # Textual's: run_worker, post_message, log
        self.known: dict[tuple, Verification] = {}  # verdicts per request key
        self.failures: dict[tuple, str] = {}  # why a verify raised, per request key
        self.running: tuple | None = None  # the key being verified
        self.stage = ""  # what it is doing, in words
        self.started = 0.0
        self.last: tuple | None = None  # the key of the verdict (or failure) come last

    def toggle(self, key: tuple, target: Target, config: Config) -> str:
        """`a` on the configuration `config` shown (`key`): verify it, or
        cancel its verify under way. Returns what to say of it."""
        if key == self.running:
            self.cancel()
            return "Verify cancelled (press a to start it again)"
        self.known.pop(key, None)  # asked again: run again (the device may differ now)
        self.failures.pop(key, None)
        self.running, self.started = key, time.monotonic()
        self.stage = f"verifying on {config.device or 'the default device'}"
        self.app.run_worker(
            lambda: self._verify(key, target, config),
            thread=True,
            group="verify",
            exclusive=True,
            exit_on_error=False,
        )
        return (
            f"Verifying {config.with_device(None).label()}: it and the code as written run "
            "on the device with the same inputs (press a again to cancel)"
        )

    def cancel(self) -> None:
        """Stop the verify under way (it stops at its next compile or run)."""
        self.running = None

    def _verify(self, key: tuple, target: Target, config: Config) -> None:
        from remat_tui.core.trace.configured import Cancelled
        from remat_tui.core.xla.verify.bisect import verify_explained

        cancelled = lambda: key != self.running  # noqa: E731
        device = config.device or "the default device"
        label = config.with_device(None).label()

        def progress(i: int, n: int, trial: Config, _stage: str) -> None:
            self.app.post_message(
                VerifyProgress(key, f"they differ: verifying {trial.with_device(None).label()} "
                                    f"({i + 1} of about {n}) to find what moves them")
            )  # fmt: skip

        self.app.post_message(
            VerifyProgress(key, f"running {label} and the code as written on {device}")
        )
        try:
            result = verify_explained(target, config, cancelled, progress=progress)
        except Cancelled:
            return
        except Exception as exc:  # bad input (a RematError), or our bug: said in place
            self.app.log.error(traceback.format_exc())
            self.app.post_message(VerifyFailed(key, failure_words(exc)))
            return
        self.app.post_message(VerifyDone(key, result))

    def progress(self, message: VerifyProgress) -> bool:
        """Whether the stage is the verify under way's (then it is shown)."""
        if message.key != self.running:
            return False
        self.stage = message.what
        return True

    def done(self, message: VerifyDone) -> bool:
        """Whether the verdict is one still wanted (then it is shown)."""
        if message.key != self.running:
            return False
        self.running = None
        self.known[message.key] = message.verification
        self.last = message.key
        return True

    def failed(self, message: VerifyFailed) -> bool:
        if message.key != self.running:
            return False
        self.running = None
        self.failures[message.key] = message.message
        self.last = message.key
        return True

    def clock(self, show_timings: bool) -> str:
        return f" {time.monotonic() - self.started:.1f} s" if show_timings else ""
