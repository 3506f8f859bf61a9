"""Provides Opening: the screens the main screen's keys open over it (compare,
fit, suggest, the diff of a marked configuration, the memory view, export,
another target), what each is given and what it gives back, and what they
remember between two openings: the budget typed last, the configuration
marked as A, the path exported to last.

Owned by the App (not a mixin): its actions await these with the values
each screen needs (app/main.py); a screen's result comes back through the
callbacks given here (a Config to open, a source line to show). Each returns
once the screen it opens is mounted, its field or list focused: the App
handles no other key meanwhile, so keys typed straight after the one that
opened it go to it, not to a screen not there yet.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.app import App

from remat_tui.app.screens import ExportScreen, PickScreen
from remat_tui.app.screens.export import write_export
from remat_tui.app.state.wanted import Wanted, request_key
from remat_tui.core.setup.config import AS_WRITTEN
from remat_tui.core.units import count
from remat_tui.errors import RematError
from remat_tui.report.units import human_bytes


class Opening:
    """The screens opened over the main screen, for one App."""

    def __init__(self, app: App, open_config: Callable, open_line: Callable) -> None:
        """`app`: Textual's (push_screen, notify, export_screenshot);
        `open_config(config)` shows a Config the user chose in the main screen,
        `open_line((file, line, residual))` a line of the user's."""
        self.app = app
        self.open_config = open_config
        self.open_line = open_line
        self.last_budget = ""  # the budget last typed for suggest (f), offered again
        self.marked: tuple | None = None  # (analysis, reloads) marked as A by m, for v
        self.last_export: str | None = None  # the export dialog offers it again

    async def compare(self, target, wanted: Wanted, show_timings: bool) -> None:
        """Every configuration's costs, in a screen of its own; a row opens in
        the main screen. The rows share the wanted site overrides and device."""
        if target is None:
            self.app.notify("nothing is loaded yet", severity="warning")
            return
        from remat_tui.app.screens.compare import CompareScreen

        base = wanted.config.with_policy(AS_WRITTEN)  # its sites kept
        screen = CompareScreen(
            target, base, wanted.compiled, self.last_budget, show_timings, wanted.measured
        )
        await self.app.push_screen(screen, self.open_config)

    async def fit(self, target, wanted: Wanted, show_timings: bool) -> None:
        """How big a batch fits a budget, for the shown configuration and every
        one compare weighs (their sites and device shared as compare's are)."""
        if target is None:
            self.app.notify("nothing is loaded yet", severity="warning")
            return
        from remat_tui.app.screens.fit import FitScreen

        base = wanted.config.with_policy(AS_WRITTEN)  # its sites kept, as compare's
        screen = FitScreen(target, base, wanted.config, self.last_budget, show_timings)
        await self.app.push_screen(screen, self.open_config)

    async def suggest(self, target, wanted: Wanted, shown, known, show_timings: bool) -> None:
        """Ask for a budget, then search for the least recompute that fits it
        (`known`: the shown configuration's compile, if any)."""
        if target is None:
            self.app.notify("nothing is loaded yet", severity="warning")
            return
        from remat_tui.app.screens.suggest import COMPILED, RESIDUAL, BudgetScreen, SuggestScreen

        # With p on, the compiled peak is the headline, so it is what must fit.
        compiled = wanted.compiled
        hint = f"Shown now: {human_bytes(shown.totals.device_bytes)} of residuals." if shown else ""
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
        await self.app.push_screen(BudgetScreen(measure, self.last_budget, hint), chosen)

    def mark(self, shown, reloads: int) -> None:
        """Mark what is shown as A: v then compares it with whatever is shown."""
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

    async def diff(self, shown, reloads: int, target_name: str | None, known: dict) -> None:
        """What the marked A and the shown B save differently (`known`: the
        compiles by request key, for where each side's peak goes)."""
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

    async def memory(self, shown, known, compiling: bool, headline: str | None) -> None:
        """Where the compiled peak of the shown configuration goes (`known`:
        its compile, if any; `compiling`: p is on)."""
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
        from remat_tui.core.xla.fates import link

        # The compile child knows no residuals: the buffers get their R# here,
        # from the analysis shown (the one whose configuration was compiled).
        _, memory = link(shown.residuals, known)
        await self.app.push_screen(MemoryScreen(memory, headline), self.open_line)

    async def pick_target(self, path: str, targets: list[str], current, start: Callable) -> None:
        """Another target of the same file (its analyses are cached apart):
        `start(name)` starts the one picked."""
        if len(targets) < 2:
            self.app.notify(f"{path} defines one target", severity="warning")
            return
        name = current.name if current else None

        def picked(chosen: str | None) -> None:
            if chosen is not None and chosen != name:
                start(chosen)

        title = f"{path}: {count(len(targets), 'target')}"
        await self.app.push_screen(PickScreen(title, targets, name), picked)

    async def export(self, shown: Callable) -> None:
        """Ask where to write the analysis shown (`shown()`), or a screenshot,
        then write it."""
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
