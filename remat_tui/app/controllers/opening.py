"""Provides Opening: the screens the main screen's keys open over it (compare,
fit, suggest, the diff of a marked configuration, the memory view, export,
another target), what each is given and what it gives back, and what they
remember between two openings: the budget typed last, the configuration
marked as A, the path exported to last.

Owned by the App (not a mixin): the keys' one App action, `opening(name)`
(app/keys.py, app/main.py), awaits the opener OPENERS names with the state as
one value (a Scene); a screen's result comes back through the callbacks
given here (a Config to open, a source line to show). Each returns
once the screen it opens is mounted, its field or list focused: the App
handles no other key meanwhile, so keys typed straight after the one that
opened it go to it, not to a screen not there yet. A screen that makes its
answer as it opens (diff, memory) makes it before it is pushed, so that an
error there is said and the main screen stays.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.app import App

from remat_tui.app.screens import ExportScreen, PickScreen
from remat_tui.app.screens.export import write_export
from remat_tui.app.screens.failure import failure_words
from remat_tui.app.state.scene import Scene
from remat_tui.app.state.wanted import request_key
from remat_tui.core.setup.config import AS_WRITTEN
from remat_tui.core.units import count, human_bytes
from remat_tui.errors import RematError
from remat_tui.report.phrases import residual_measure, whose

if TYPE_CHECKING:
    from remat_tui.core.xla.compile.compiled import Compiled


class Opening:
    """The screens opened over the main screen, for one App."""

    def __init__(
        self,
        app: App,
        open_config: Callable,
        open_line: Callable,
        known: Callable,
        headline: Callable,
        start: Callable,
        show_timings: bool,
    ) -> None:
        """`app`: Textual's (push_screen, notify, export_screenshot);
        `open_config(config)` shows a Config the user chose in the main screen,
        `open_line((file, line, residual))` a line of the user's; `known()`:
        the compiles known, by request key (app/controllers/compiles.py);
        `headline(scene)`: the status line's words for what is shown;
        `start(name)`: start another target of the file; `show_timings`: the
        searches' clocks shown."""
        self.app = app
        self.open_config = open_config
        self.open_line = open_line
        self.known = known
        self.headline = headline
        self.start = start
        self.show_timings = show_timings
        self.last_budget = ""  # the budget last typed for suggest (b) or fit (f), offered again
        self.marked: tuple | None = None  # (analysis, reloads) marked as A by m, for v
        self.last_export: str | None = None  # the export dialog offers it again
        self.shown: Callable = lambda: None  # the analysis shown now, for export

    async def open(self, what: str, scene: Scene, shown_now: Callable) -> None:
        """Run the opener named `what` (OPENERS, the keys' `app.opening(...)`)
        with the state as it is now (`shown_now()`: the analysis shown when the
        export is written, after its dialog closed)."""
        self.shown = shown_now
        try:
            await OPENERS[what](self, scene)
        except Exception as exc:  # a view made as it opens (diff, memory) raised
            self.app.log.error(traceback.format_exc())
            self.app.notify(f"{what} failed: {failure_words(exc)}", severity="error", markup=False)

    def shown_compile(self, scene: Scene) -> Compiled | None:
        """The compiled numbers of the analysis shown, when known."""
        return self.known().get(scene.key_of(scene.shown)) if scene.shown else None

    async def compare(self, scene: Scene) -> None:
        """Every configuration's costs, in a screen of its own; a row opens in
        the main screen. The rows share the wanted site overrides and device."""
        target, wanted, show_timings = scene.target, scene.wanted, self.show_timings
        if target is None:
            self.app.notify("nothing is loaded yet", severity="warning")
            return
        from remat_tui.app.screens.compare import CompareScreen

        base = wanted.config.with_policy(AS_WRITTEN)  # its sites kept
        screen = CompareScreen(
            target, base, wanted.compiled, self.last_budget, show_timings, wanted.measured
        )
        await self.app.push_screen(screen, self.open_config)

    async def fit(self, scene: Scene) -> None:
        """How big a batch fits a budget, for the shown configuration and every
        one compare weighs (their sites and device shared as compare's are)."""
        target, wanted, show_timings = scene.target, scene.wanted, self.show_timings
        if target is None:
            self.app.notify("nothing is loaded yet", severity="warning")
            return
        from remat_tui.app.screens.fit import FitScreen

        base = wanted.config.with_policy(AS_WRITTEN)  # its sites kept, as compare's
        screen = FitScreen(target, base, wanted.config, self.last_budget, show_timings)
        await self.app.push_screen(screen, self.open_config)

    async def suggest(self, scene: Scene) -> None:
        """Ask for a budget, then search for the least recompute that fits it
        (with p on: the fastest estimated step whose compiled peak fits; with
        x: the fastest measured)."""
        target, wanted, shown, show_timings = (
            scene.target,
            scene.wanted,
            scene.shown,
            self.show_timings,
        )
        known = self.shown_compile(scene)
        if target is None:
            self.app.notify("nothing is loaded yet", severity="warning")
            return
        from remat_tui.app.screens.budget import BudgetScreen
        from remat_tui.app.screens.suggest import (
            COMPILED,
            LOOKS_FOR,
            RESIDUAL,
            SuggestScreen,
            ranking,
        )

        # With p on, the compiled peak is the headline, so it is what must fit.
        compiled = wanted.compiled
        hint = (
            f"Shown now: residuals of {whose(shown, shown.totals.device_bytes)}." if shown else ""
        )
        if compiled and known is not None:
            hint = (
                f"Shown now: peak {human_bytes(known.peak_bytes)} per device (compiled)."
                if known.fits
                else f"Shown now: does not fit {known.device} (compiled)."
            )
        device = wanted.device

        def chosen(budget: tuple[int, str] | None) -> None:
            if budget is not None:
                self.last_budget = budget[1]
                screen = SuggestScreen(
                    target, budget, device, compiled, show_timings, wanted.measured
                )
                self.app.push_screen(screen, self.open_config)

        measure = COMPILED if compiled else RESIDUAL
        if not compiled and shown is not None:  # global array sizes, where they are all known
            measure = residual_measure(shown.auto_sharded_devices, shown.sharded)
        looks_for = LOOKS_FOR[ranking(compiled, wanted.measured)]
        await self.app.push_screen(BudgetScreen(measure, looks_for, self.last_budget, hint), chosen)

    async def mark(self, scene: Scene) -> None:
        """Mark what is shown as A: v then compares it with whatever is shown."""
        shown, reloads = scene.shown, scene.reloads
        if shown is None:
            self.app.notify("nothing is shown yet to mark", severity="warning")
            return
        self.marked = (shown, reloads)
        self.app.notify(
            f"Marked as A: {shown.config.label()}. Change the policy, a site or a "
            "name, then v shows what B saves differently.",
            title="marked A",
            markup=False,
        )

    async def diff(self, scene: Scene) -> None:
        """What the marked A and the shown B save differently (with the
        compiles known, for where each side's peak goes)."""
        shown, reloads, known = scene.shown, scene.reloads, self.known()
        target_name = scene.target.name if scene.target else None
        if self.marked is None:
            self.app.notify(
                "nothing marked: m marks the shown configuration as A", severity="warning"
            )
            return
        a, marked_at = self.marked
        b = shown
        if b is None:
            return
        if a.target_name != b.target_name:
            self.app.notify(
                f"A was marked on target {a.target_name}, this is {b.target_name}: "
                "m marks this one",
                severity="warning",
                markup=False,
            )
            return
        if a.config == b.config and marked_at == reloads:
            self.app.notify(
                "A is what is shown: change the policy, a site or a name, then v",
                severity="warning",
            )
            return
        from remat_tui.app.screens.diff import DiffScreen

        compiled = (
            known.get(request_key(target_name, a.config, marked_at)),
            known.get(request_key(target_name, b.config, reloads)),
        )
        memories = tuple(c.memory if c is not None else None for c in compiled)
        await self.app.push_screen(
            DiffScreen(a, b, a_reloaded=marked_at != reloads, memories=memories),
            self.open_config,
        )

    async def memory(self, scene: Scene) -> None:
        """Where the compiled peak of the shown configuration goes (once p
        compiled it)."""
        shown, known, compiling = scene.shown, self.shown_compile(scene), scene.wanted.compiled
        if known is None:
            hint = (
                "compiling it: w again once the peak shows"
                if compiling
                else ("p compiles the shown configuration first")
            )
            self.app.notify(f"no compiled peak yet: {hint}", severity="warning")
            return
        if known.memory is None:
            why = known.memory_note or (
                "XLA reports no schedule for a program that does not fit"
                if not known.fits
                else "XLA's record of the compile was not available"
            )
            self.app.notify(f"no breakdown of the peak: {why}", severity="warning", markup=False)
            return
        from remat_tui.app.screens.memory import MemoryScreen
        from remat_tui.core.xla.fates.residuals import link

        # The compile child knows no residuals: the buffers get their R# here,
        # from the analysis shown (the one whose configuration was compiled).
        assert shown is not None  # its compile is known
        _, memory = link(shown.residuals, known)
        assert memory is not None  # known.memory is: a breakdown to name the buffers of
        headline = self.headline(scene)
        await self.app.push_screen(MemoryScreen(memory, headline), self.open_line)

    async def pick_target(self, scene: Scene) -> None:
        """Another target of the same file (its analyses are cached apart)."""
        path, targets, current, start = (
            scene.path,
            list(scene.loaded.targets),
            scene.target,
            self.start,
        )
        if len(targets) < 2:
            self.app.notify(f"{path} defines one target", severity="warning")
            return
        name = current.name if current else None

        def picked(chosen: str | None) -> None:
            if chosen is not None and chosen != name:
                start(chosen)

        title = f"{path}: {count(len(targets), 'target')}"
        await self.app.push_screen(PickScreen(title, targets, name), picked)

    async def export(self, scene: Scene) -> None:
        """Ask where to write the analysis shown (as it is when the dialog
        closes), or a screenshot, then write it."""
        shown = self.shown
        if shown() is None:
            self.app.notify("nothing to export yet", severity="warning")
            return
        default = self.last_export or f"remat-{shown().target_name}.html"
        await self.app.push_screen(ExportScreen(default), lambda choice: self._write(choice, shown))

    def _write(self, choice: tuple[str, str] | None, shown: Callable) -> None:
        """Write `choice` (path, format); on failure reopen the dialog with the
        same path and the reason. Runs once the dialog is closed, so an SVG
        screenshot shows the app, not the dialog."""
        if choice is None:
            return
        path, fmt = choice
        self.last_export = path
        try:
            written = write_export(path, fmt, shown(), self.app.export_screenshot)
        except RematError as exc:
            self.app.push_screen(
                ExportScreen(path, error=f"export failed: {exc.message}"),
                lambda again: self._write(again, shown),
            )
            return
        self.app.notify(f"wrote {written}", title=f"exported {fmt}", markup=False)


# What each `app.opening(...)` key runs (app/keys.py): the App's one action
# for all of them hands the opener the state as one value.
OPENERS = {
    "compare": Opening.compare,
    "fit": Opening.fit,
    "suggest": Opening.suggest,
    "mark": Opening.mark,
    "diff": Opening.diff,
    "memory": Opening.memory,
    "export": Opening.export,
    "pick_target": Opening.pick_target,
}
