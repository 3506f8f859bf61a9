"""Provides KeyActions: what each key binding does (the BINDINGS live on
RematApp). A mixin of RematApp.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from remat_tui.app.commands import keep_typed
from remat_tui.app.keys import BINDINGS
from remat_tui.app.residual_table import ResidualTable
from remat_tui.app.screens import ExportScreen, HelpScreen, PickScreen, export
from remat_tui.app.sidebar import Sidebar
from remat_tui.app.wanted import request_key
from remat_tui.core.setup import policies
from remat_tui.report.units import human_bytes

# Every key of the main screen but help and quit: it acts on what the main
# screen shows (its policy, lists, residual table).
MAIN_SCREEN_ONLY = {b.action.split("(")[0] for b in BINDINGS} - {"help", "quit"}


class KeyActions:
    """The action_* methods of the key bindings (mixed into RematApp)."""

    marked: tuple | None = None
    """(analysis, reloads) marked as A by m, for the diff (v)."""
    last_budget = ""
    """The budget last typed for suggest (f), offered again."""

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """The main screen's keys act on the main screen: over another screen
        (compare, suggest, diff, a list to pick from) a digit would change the
        policy out of sight and f, m, v would stack screens on screens, so
        there they are off and out of the footer; help and quit stay."""
        if action in MAIN_SCREEN_ONLY and len(self.screen_stack) > 1:
            return False
        return super().check_action(action, parameters)

    def action_policy(self, index: int) -> None:
        sidebar = self.query_one(Sidebar)
        if index >= len(self.policy_specs):
            last = len(self.policy_specs) - 1
            self.notify(
                f"no policy {index}: the list has 0-{last} (ctrl+p to type any spec)"
                if self.policy_specs
                else "no target is loaded yet",
                severity="warning",
            )
            return
        if sidebar.sites_focused and sidebar.highlighted_site is not None:
            self.apply_site(sidebar.highlighted_site, self.policy_specs[index])
        else:
            self.apply_policy(self.policy_specs[index])

    def action_cycle_name(self) -> None:
        sidebar = self.query_one(Sidebar)
        if self.target is None:
            self.notify("no target is loaded", severity="warning")
        elif sidebar.sites_focused and sidebar.highlighted_site is not None:
            self.cycle_site(sidebar.highlighted_site)
        elif not sidebar.has_names:
            self.notify("this function defines no checkpoint_name", severity="warning")
        elif not sidebar.names_focused:
            # A stray space elsewhere must not start a trace: go to the names first.
            self.widths.reveal_sidebar()
            sidebar.focus_names()
            self.notify("Names: ↑ ↓ pick a name, space cycles recompute → save → offload")
        elif (name := sidebar.highlighted_name) is not None:
            self.cycle_name(name)

    def action_focus_names(self) -> None:
        self.widths.reveal_sidebar()
        self.query_one(Sidebar).focus_names()

    def action_toggle_sidebar(self) -> None:
        self.widths.toggle_sidebar()

    def action_pick_target(self) -> None:
        """Open another target of the same file (its analyses are cached apart)."""
        if len(self.targets) < 2:
            self.notify(f"{self.path} defines one target", severity="warning")
            return
        current = self.target.name if self.target else None

        def picked(name: str | None) -> None:
            if name is not None and name != current:
                before = list(self.policy_specs)
                self.start(self.targets[name])
                keep_typed(self, before)

        title = f"{self.path}: {len(self.targets)} targets"
        self.push_screen(PickScreen(title, list(self.targets), current), picked)

    def action_focus_sites(self) -> None:
        self.widths.reveal_sidebar()
        if not self.query_one(Sidebar).focus_sites():
            self.notify("this function applies no jax.checkpoint: no sites", severity="warning")

    def action_compare(self) -> None:
        """Every configuration's costs, in a screen of its own; a row opens here."""
        if self.target is None or self.spec is None:
            self.notify("nothing is loaded yet", severity="warning")
            return
        from remat_tui.app.screens.compare import CompareScreen

        base = replace(self.wanted, policy=policies.AS_WRITTEN).config  # its sites kept
        screen = CompareScreen(self.target, base, self.wanted.compiled, self.last_budget)
        self.push_screen(screen, self.open_config)

    def action_suggest(self) -> None:
        """Ask for a budget, then search for the least recompute that fits it."""
        if self.target is None or self.spec is None:
            self.notify("nothing is loaded yet", severity="warning")
            return
        from remat_tui.app.screens.suggest import COMPILED, RESIDUAL, BudgetScreen, SuggestScreen

        # With p on, the compiled peak is the headline, so it is what must fit.
        compiled = self.wanted.compiled
        a = self.shown
        hint = f"Shown now: {human_bytes(a.totals.device_bytes)} of residuals." if a else ""
        known = self.compiles.known.get(self.key_of(a)) if a else None
        if compiled and known is not None:
            hint = (
                f"Shown now: peak {human_bytes(known.peak_bytes)} per device (compiled)."
                if known.fits
                else f"Shown now: does not fit {known.device} (compiled)."
            )
        target, device = self.target, self.device

        def chosen(budget: tuple[int, str] | None) -> None:
            if budget is not None:
                self.last_budget = budget[1]
                self.push_screen(SuggestScreen(target, budget, device, compiled), self.open_config)

        measure = COMPILED if compiled else RESIDUAL
        self.push_screen(BudgetScreen(measure, self.last_budget, hint), chosen)

    def action_mark(self) -> None:
        """Mark what is shown as A: v then compares it with whatever is shown."""
        if self.shown is None:
            self.notify("nothing is shown yet to mark", severity="warning")
            return
        self.marked = (self.shown, self.reloads)
        self.notify(
            f"Marked as A: {self.shown.config.label()}. Change the policy, a site or a "
            "name, then v shows what B saves differently.",
            title="marked A",
            markup=False,
        )

    def action_diff(self) -> None:
        """What the marked A and the shown B save differently."""
        if self.marked is None:
            self.notify("nothing marked: m marks the shown configuration as A", severity="warning")
            return
        a, reloads = self.marked
        b = self.shown
        if b is None:
            return
        if a.target_name != b.target_name:
            self.notify(
                f"A was marked on target {a.target_name}, this is {b.target_name}: "
                "m marks this one",
                severity="warning",
                markup=False,
            )
            return
        if a.config == b.config and reloads == self.reloads:
            self.notify(
                "A is what is shown: change the policy, a site or a name, then v",
                severity="warning",
            )
            return
        from remat_tui.app.screens.diff import DiffScreen

        name = self.target.name if self.target else None
        known = self.compiles.known
        compiled = (known.get(request_key(name, a.config, reloads)), known.get(self.key_of(b)))
        memories = tuple(c.memory if c is not None else None for c in compiled)
        self.push_screen(
            DiffScreen(a, b, a_reloaded=reloads != self.reloads, memories=memories),
            self.open_config,
        )

    def action_memory(self) -> None:
        """Where the compiled peak of the shown configuration goes (p compiles it)."""
        a = self.shown
        known = self.compiles.known.get(self.key_of(a)) if a is not None else None
        if known is None:
            hint = (
                "compiling it: w again once the peak shows"
                if self.wanted.compiled
                else ("p compiles the shown configuration first")
            )
            self.notify(f"no compiled peak yet: {hint}", severity="warning")
            return
        if known.memory is None:
            why = known.memory_note or (
                "XLA reports no schedule for a program that does not fit"
                if not known.fits
                else "XLA's record of the compile was not available"
            )
            self.notify(f"no breakdown of the peak: {why}", severity="warning", markup=False)
            return
        from remat_tui.app.screens.memory import MemoryScreen
        from remat_tui.core.xla.compiled_analysis import name_residuals

        # The compile child knows no residuals: the buffers get their R# here,
        # from the analysis shown (the one whose configuration was compiled).
        memory = {**known.memory, "at_peak": name_residuals(known.memory["at_peak"], a.residuals)}
        self.push_screen(MemoryScreen(memory, self.compiled_headline(a)), self.open_line)

    def open_line(self, where: tuple[str, int, str | None] | None) -> None:
        """Show a user's line (from the memory screen) in the source pane, and
        select the buffer's residual (`R3`), else the first one made there."""
        if where is None or self.shown is None:
            return
        path, line, residual = where
        index = int(residual[1:]) - 1 if residual else None
        index = (
            index
            if index is not None
            else next(
                (
                    i
                    for i, r in enumerate(self.shown.residuals)
                    for src in (r.source, r.origin.source if r.origin else None)
                    if src is not None and src.file == path and src.line == line
                ),
                None,
            )
        )
        if index is not None:
            self.query_one(ResidualTable).select(index)
        self.show_source(path, line - 1)

    def action_sort_residuals(self) -> None:
        """Residuals by bytes, largest first, or back in JAX's order."""
        table = self.query_one(ResidualTable)
        table.by_bytes = not table.by_bytes
        order = "by bytes, largest first" if table.by_bytes else "in JAX's order"
        table.border_subtitle = "sorted by bytes (o)" if table.by_bytes else ""
        self.notify(f"Residuals {order} (o toggles)")

    def action_focus_residuals(self) -> None:
        self.query_one(ResidualTable).focus()

    def action_pick_device(self) -> None:
        """Focus the Device list (enter there picks one)."""
        if not self.devices:
            return
        self.widths.reveal_sidebar()
        self.query_one(Sidebar).focus_devices()

    def choose_device(self, device: str) -> None:
        if device != self.device:
            self.wanted = replace(self.wanted, device=device)

    def action_export(self) -> None:
        if self.shown is None:
            self.notify("nothing to export yet", severity="warning")
            return
        default = self.last_export or f"remat-{self.shown.target_name}.html"
        self.push_screen(ExportScreen(default), partial(export, self))

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.BINDINGS))
