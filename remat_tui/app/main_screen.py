"""Provides MainScreen: the screen the app's panes live on, its layout, its
keys (the bindings in app/keys.py) and its `view` (app/shown_view.py), which
draws the analysis shown into its widgets. Its actions read what the App shows and
ask for changes through the App's want-operations (apply_policy, apply_site,
cycle_name, open_config, choose_device), which make a new `wanted`.

Textual's Screen repaints itself whole whenever the focus moves (its `focused`
reactive repaints by default), though only the two widgets whose `:focus`
style changed need it, and they repaint themselves when their styles update.
At 160x45 that whole-screen render was most of what a focus key (`r`, `n`,
`s`, `tab`) cost the UI thread; the keys that move the focus are the ones
typed most.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from pygments.lexers import PythonLexer
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from remat_tui.app.codeview import CodeView
from remat_tui.app.commands import keep_typed
from remat_tui.app.drawing import TABLE_COLUMNS
from remat_tui.app.footer import Footer
from remat_tui.app.keys import MAIN_KEYS
from remat_tui.app.lexer import JaxprLexer
from remat_tui.app.residual_table import ResidualTable
from remat_tui.app.screens import ExportScreen, PickScreen, export
from remat_tui.app.shown_view import ShownView
from remat_tui.app.sidebar import Sidebar, next_state
from remat_tui.app.site_state import (
    next_site_policy,
    scope_states,
    site_scope,
    toggled_overrides,
)
from remat_tui.app.wanted import request_key
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.errors import RematError
from remat_tui.report.units import human_bytes


class MainScreen(Screen):
    """The panes, the lists and the status line; the keys that act on them."""

    BINDINGS = MAIN_KEYS
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.view = ShownView(self)  # draws the shown analysis into the widgets below

    def compose(self) -> ComposeResult:
        yield Static(f"remat-tui  {self.app.path}  loading JAX…", id="title")
        with Horizontal(id="body"):
            yield Sidebar(id="sidebar")
            with Vertical(id="main"):
                yield Static("", id="error")
                with Horizontal(id="panes"):
                    yield CodeView(JaxprLexer(), id="forward")
                    yield CodeView(JaxprLexer(), id="backward")
                with Horizontal(id="lower"):
                    yield ResidualTable(TABLE_COLUMNS, id="residuals")
                    yield CodeView(PythonLexer(), id="source")
        yield Static("", id="snippet", markup=False)
        yield Static(
            "Loading JAX… (the first import takes a few seconds)", id="status", markup=False
        )
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#forward").border_title = "forward (vjp)"
        self.query_one("#backward").border_title = "backward"
        self.query_one("#residuals").border_title = "Residuals"
        self.query_one("#source").border_title = "Source"
        self.query_one("#error").display = False
        self.app.load()  # the widgets it draws into are all mounted now

    @on(ResidualTable.Highlighted)
    def row_highlighted(self, event: ResidualTable.Highlighted) -> None:
        self.view.select_residual(event.index)

    # ---- changes to what is wanted, where they depend on the lists' selection ----------

    def apply_site(self, site: int | str, text: str | None) -> None:
        """Want a site's policy (None: as written in the code)."""
        if self.app.target is None:
            return
        try:
            spec = (
                None if text is None else policies.parse(text, self.app.target.policies).canonical
            )
        except RematError as exc:
            self.view.show_error(f"site {site}: {exc.message}")
            return
        overrides = dict(self.app.site_overrides)
        overrides.pop(site, None)
        if spec is not None:
            overrides[site] = spec
        self.app.wanted = self.app.wanted.with_sites(overrides)

    def cycle_site(self, site_id: int) -> None:
        """as in the code → each listed policy → as in the code."""
        site = (
            next((s for s in self.app.shown.sites if s.id == site_id), None)
            if self.app.shown
            else None
        )
        if site is not None:
            self.apply_site(site_id, next_site_policy(site, self.app.policy_specs))

    def cycle_name(self, name: str) -> None:
        """recompute → save → offload, where name toggles apply (`name_scope`)."""
        states = dict(self.app.name_states)
        states[name] = next_state(states.get(name, "recompute"))
        saved = [n for n, s in states.items() if s == "save"]
        offloaded = [n for n, s in states.items() if s == "offload"]
        composed = policies.names_policy(saved, offloaded).canonical
        scope = self.name_scope()
        if scope is None:
            self.app.apply_policy(composed)
        else:  # the checkpoint in the code is the lever: set it at every site of the function
            self.app.wanted = self.app.wanted.with_sites(
                toggled_overrides(self.app.site_overrides, self.app.shown, scope.function, composed)
            )

    def open_config(self, config: Config | None) -> None:
        """Want `config` (outer policy, site overrides, device): a row of
        compare, suggest's answer, a side of the diff."""
        if config is not None:
            self.app.wanted = self.app.wanted.with_config(config)

    def choose_device(self, device: str) -> None:
        if device != self.app.device:
            self.app.wanted = replace(self.app.wanted, device=device)

    def name_scope(self):
        """Where name toggles apply: every site of the highlighted site's function,
        or the outer policy (None) when the function has no sites."""
        return site_scope(self.app.shown, self.query_one(Sidebar).highlighted_site)

    def scoped_states(self) -> dict[str, str]:
        return scope_states(
            self.name_scope(),
            self.app.spec,
            self.app.analyses.names_seen(),
            self.app.site_overrides,
            self.app.target.policies if self.app.target else None,
        )

    # ---- the Sidebar's lists ------------------------------------------------------------

    def on_sidebar_site_chosen(self, message: Sidebar.SiteChosen) -> None:
        self.cycle_site(message.site)

    def on_sidebar_site_highlighted(self, message: Sidebar.SiteHighlighted) -> None:
        self.app.name_states = self.scoped_states()
        self.view.refresh_sidebar()

    def on_sidebar_policy_chosen(self, message: Sidebar.PolicyChosen) -> None:
        self.app.apply_policy(message.spec)

    def on_sidebar_device_chosen(self, message: Sidebar.DeviceChosen) -> None:
        self.choose_device(message.device)

    def on_sidebar_name_chosen(self, message: Sidebar.NameChosen) -> None:
        self.cycle_name(message.name)

    # ---- the keys -----------------------------------------------------------------------

    def action_policy(self, index: int) -> None:
        sidebar = self.query_one(Sidebar)
        if index >= len(self.app.policy_specs):
            last = len(self.app.policy_specs) - 1
            self.notify(
                f"no policy {index}: the list has 0-{last} (ctrl+p to type any spec)"
                if self.app.policy_specs
                else "no target is loaded yet",
                severity="warning",
            )
            return
        if sidebar.sites_focused and sidebar.highlighted_site is not None:
            self.apply_site(sidebar.highlighted_site, self.app.policy_specs[index])
        else:
            self.app.apply_policy(self.app.policy_specs[index])

    def action_cycle_name(self) -> None:
        sidebar = self.query_one(Sidebar)
        if self.app.target is None:
            self.notify("no target is loaded", severity="warning")
        elif sidebar.sites_focused and sidebar.highlighted_site is not None:
            self.cycle_site(sidebar.highlighted_site)
        elif not sidebar.has_names:
            self.notify("this function defines no checkpoint_name", severity="warning")
        elif not sidebar.names_focused:
            # A stray space elsewhere must not start a trace: go to the names first.
            self.app.widths.reveal_sidebar()
            sidebar.focus_names()
            self.notify("Names: ↑ ↓ pick a name, space cycles recompute → save → offload")
        elif (name := sidebar.highlighted_name) is not None:
            self.cycle_name(name)

    def action_focus_names(self) -> None:
        self.app.widths.reveal_sidebar()
        self.query_one(Sidebar).focus_names()

    def action_toggle_sidebar(self) -> None:
        self.app.widths.toggle_sidebar()

    def action_pick_target(self) -> None:
        """Open another target of the same file (its analyses are cached apart)."""
        if len(self.app.targets) < 2:
            self.notify(f"{self.app.path} defines one target", severity="warning")
            return
        current = self.app.target.name if self.app.target else None

        def picked(name: str | None) -> None:
            if name is not None and name != current:
                before = list(self.app.policy_specs)
                self.app.start(self.app.targets[name])
                keep_typed(self.app, before)

        title = f"{self.app.path}: {len(self.app.targets)} targets"
        self.app.push_screen(PickScreen(title, list(self.app.targets), current), picked)

    def action_focus_sites(self) -> None:
        self.app.widths.reveal_sidebar()
        if not self.query_one(Sidebar).focus_sites():
            self.notify("this function applies no jax.checkpoint: no sites", severity="warning")

    def action_compare(self) -> None:
        """Every configuration's costs, in a screen of its own; a row opens here."""
        if self.app.target is None or self.app.spec is None:
            self.notify("nothing is loaded yet", severity="warning")
            return
        from remat_tui.app.screens.compare import CompareScreen

        base = replace(self.app.wanted, policy=policies.AS_WRITTEN).config  # its sites kept
        screen = CompareScreen(
            self.app.target, base, self.app.wanted.compiled, self.app.last_budget
        )
        self.app.push_screen(screen, self.open_config)

    def action_fit(self) -> None:
        """How big a batch fits, for the shown configuration and the compared ones."""
        if self.app.target is None or self.app.spec is None:
            self.notify("nothing is loaded yet", severity="warning")
            return
        from remat_tui.app.screens.fit import FitScreen

        base = replace(self.app.wanted, policy=policies.AS_WRITTEN).config  # as compare: sites kept
        screen = FitScreen(self.app.target, base, self.app.wanted.config, self.app.last_budget,
                           self.app.show_timings)  # fmt: skip
        self.app.push_screen(screen, self.open_config)

    def action_suggest(self) -> None:
        """Ask for a budget, then search for the least recompute that fits it."""
        if self.app.target is None or self.app.spec is None:
            self.notify("nothing is loaded yet", severity="warning")
            return
        from remat_tui.app.screens.suggest import COMPILED, RESIDUAL, BudgetScreen, SuggestScreen

        # With p on, the compiled peak is the headline, so it is what must fit.
        compiled = self.app.wanted.compiled
        a = self.app.shown
        hint = f"Shown now: {human_bytes(a.totals.device_bytes)} of residuals." if a else ""
        known = self.app.compiles.known.get(self.app.key_of(a)) if a else None
        if compiled and known is not None:
            hint = (
                f"Shown now: peak {human_bytes(known.peak_bytes)} per device (compiled)."
                if known.fits
                else f"Shown now: does not fit {known.device} (compiled)."
            )
        target, device = self.app.target, self.app.device

        def chosen(budget: tuple[int, str] | None) -> None:
            if budget is not None:
                self.app.last_budget = budget[1]
                self.app.push_screen(
                    SuggestScreen(target, budget, device, compiled), self.open_config
                )

        measure = COMPILED if compiled else RESIDUAL
        self.app.push_screen(BudgetScreen(measure, self.app.last_budget, hint), chosen)

    def action_mark(self) -> None:
        """Mark what is shown as A: v then compares it with whatever is shown."""
        if self.app.shown is None:
            self.notify("nothing is shown yet to mark", severity="warning")
            return
        self.app.marked = (self.app.shown, self.app.reloads)
        self.notify(
            f"Marked as A: {self.app.shown.config.label()}. Change the policy, a site or a "
            "name, then v shows what B saves differently.",
            title="marked A",
            markup=False,
        )

    def action_diff(self) -> None:
        """What the marked A and the shown B save differently."""
        if self.app.marked is None:
            self.notify("nothing marked: m marks the shown configuration as A", severity="warning")
            return
        a, reloads = self.app.marked
        b = self.app.shown
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
        if a.config == b.config and reloads == self.app.reloads:
            self.notify(
                "A is what is shown: change the policy, a site or a name, then v",
                severity="warning",
            )
            return
        from remat_tui.app.screens.diff import DiffScreen

        name = self.app.target.name if self.app.target else None
        known = self.app.compiles.known
        compiled = (known.get(request_key(name, a.config, reloads)), known.get(self.app.key_of(b)))
        memories = tuple(c.memory if c is not None else None for c in compiled)
        self.app.push_screen(
            DiffScreen(a, b, a_reloaded=reloads != self.app.reloads, memories=memories),
            self.open_config,
        )

    def action_toggle_compile(self) -> None:
        self.app.wanted = replace(self.app.wanted, compiled=not self.app.wanted.compiled)

    def action_memory(self) -> None:
        """Where the compiled peak of the shown configuration goes (p compiles it)."""
        a = self.app.shown
        known = self.app.compiles.known.get(self.app.key_of(a)) if a is not None else None
        if known is None:
            hint = (
                "compiling it: w again once the peak shows"
                if self.app.wanted.compiled
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
        self.app.push_screen(MemoryScreen(memory, self.app.compiled_headline(a)), self.open_line)

    def open_line(self, where: tuple[str, int, str | None] | None) -> None:
        """Show a user's line (from the memory screen) in the source pane, and
        select the buffer's residual (`R3`), else the first one made there."""
        if where is None or self.app.shown is None:
            return
        path, line, residual = where
        index = int(residual[1:]) - 1 if residual else None
        index = (
            index
            if index is not None
            else next(
                (
                    i
                    for i, r in enumerate(self.app.shown.residuals)
                    for src in (r.source, r.origin.source if r.origin else None)
                    if src is not None and src.file == path and src.line == line
                ),
                None,
            )
        )
        if index is not None:
            self.query_one(ResidualTable).select(index)
        self.view.show_source(path, line - 1)

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
        if not self.app.devices:
            return
        self.app.widths.reveal_sidebar()
        self.query_one(Sidebar).focus_devices()

    def action_export(self) -> None:
        if self.app.shown is None:
            self.notify("nothing to export yet", severity="warning")
            return
        default = self.app.last_export or f"remat-{self.app.shown.target_name}.html"
        self.app.push_screen(ExportScreen(default), partial(export, self.app))
