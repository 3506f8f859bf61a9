"""Provides MainScreen: the screen the app's panes live on, its layout and
the keys that act on its own widgets (focus, sort, the sidebar shown or
not), and its `view` (app/widgets/shown_view.py), which paints what the App gives it.

It reads no App state. What it shows comes down from the App (through
`view`; `path` and `widths` in its constructor; `target_loaded`, set once a
target starts); what the user asks for goes up as messages (the Sidebar's,
and app/messages.py's), or to the App's own actions: the keys that need the
App's state (a policy by number, compare, suggest, mark, diff, the memory
view, export, another target, compiling) are bound to `app.` actions in
app/keys.py.

Textual's Screen repaints itself whole whenever the focus moves (its `focused`
reactive repaints by default), though only the two widgets whose `:focus`
style changed need it, and they repaint themselves when their styles update.
At 160x45 that whole-screen render was most of what a focus key (`r`, `n`,
`s`, `tab`) cost the UI thread; the keys that move the focus are the ones
typed most.
"""

from __future__ import annotations

from typing import Any, Protocol

from pygments.lexers import PythonLexer
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from remat_tui.app.keys import MAIN_KEYS
from remat_tui.app.messages import ScreenReady
from remat_tui.app.state.drawing import TABLE_COLUMNS
from remat_tui.app.widgets.codeview import CodeView
from remat_tui.app.widgets.footer import Footer
from remat_tui.app.widgets.lexer import JaxprLexer
from remat_tui.app.widgets.residual_table import ResidualTable
from remat_tui.app.widgets.shown_view import ShownView
from remat_tui.app.widgets.sidebar import Sidebar
from remat_tui.app.widgets.story_panel import StoryPanel


class SidebarWidths(Protocol):
    """What the screen asks of the App's layout (app/controllers/layout.py,
    given in the constructor: a screen imports no controller)."""

    def reveal_sidebar(self) -> None: ...

    def toggle_sidebar(self) -> None: ...


class MainScreen(Screen):
    """The panes, the lists and the status line; the keys that act on them."""

    BINDINGS = MAIN_KEYS
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    def __init__(self, path: str, widths: SidebarWidths, **kwargs: Any) -> None:
        """`path`: the target file, named in the title until it is loaded;
        `widths`: the App's layout for the terminal's width (the sidebar)."""
        super().__init__(**kwargs)
        self.path = path
        self.widths = widths
        self.target_loaded = False  # set by the App once a target starts
        self.view = ShownView(self)  # paints what the App gives it into the widgets below

    def compose(self) -> ComposeResult:
        yield Static(f"remat-tui  {self.path}  loading JAX…", id="title")
        with Horizontal(id="body"):
            yield Sidebar(id="sidebar")
            with Vertical(id="main"):
                yield Static("", id="error")
                yield Static("", id="verdict", markup=False)  # a: the gradients verified
                with Horizontal(id="panes"):
                    yield CodeView(JaxprLexer(), id="forward")
                    yield CodeView(JaxprLexer(), id="backward")
                with Horizontal(id="lower"):
                    yield ResidualTable(TABLE_COLUMNS, id="residuals")
                    yield CodeView(PythonLexer(), id="source")
                yield StoryPanel(id="story")
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
        self.query_one("#verdict").display = False  # until a
        self.query_one("#story").display = False  # y shows it
        self.post_message(ScreenReady())  # the widgets loading draws into are all mounted

    @property
    def sidebar(self) -> Sidebar:
        return self.query_one(Sidebar)

    @on(ResidualTable.Highlighted)
    def row_highlighted(self, event: ResidualTable.Highlighted) -> None:
        self.view.select_residual(event.index)

    # ---- the keys that act on this screen's widgets --------------------------------------

    def action_cycle_name(self) -> None:
        sidebar = self.sidebar
        if not self.target_loaded:
            self.notify("no target is loaded", severity="warning")
        elif sidebar.sites_focused and sidebar.highlighted_site is not None:
            self.post_message(Sidebar.SiteChosen(sidebar.highlighted_site))
        elif not sidebar.has_names:
            self.notify("this function defines no checkpoint_name", severity="warning")
        elif not sidebar.names_focused:
            # A stray space elsewhere must not start a trace: go to the names first.
            self.widths.reveal_sidebar()
            sidebar.focus_names()
            self.notify("Names: ↑ ↓ pick a name, space cycles recompute → save → offload")
        elif (name := sidebar.highlighted_name) is not None:
            self.post_message(Sidebar.NameChosen(name))

    def action_focus_names(self) -> None:
        self.widths.reveal_sidebar()
        self.sidebar.focus_names()

    def action_toggle_sidebar(self) -> None:
        self.widths.toggle_sidebar()

    def action_focus_sites(self) -> None:
        self.widths.reveal_sidebar()
        if not self.sidebar.focus_sites():
            self.notify("this function applies no jax.checkpoint: no sites", severity="warning")

    def action_sort_residuals(self) -> None:
        """Residuals by bytes, largest first, or back in JAX's order."""
        table = self.query_one(ResidualTable)
        table.by_bytes = not table.by_bytes
        order = "by bytes, largest first" if table.by_bytes else "in JAX's order"
        table.border_subtitle = "sorted by bytes (o)" if table.by_bytes else ""
        self.notify(f"Residuals {order} (o toggles)")

    def action_toggle_story(self) -> None:
        """The selected residual's story beneath the table, or not."""
        self.view.toggle_story()

    def action_focus_residuals(self) -> None:
        self.query_one(ResidualTable).focus()

    def action_pick_device(self) -> None:
        """Focus the Device list (enter there picks one)."""
        if not self.target_loaded:
            return
        self.widths.reveal_sidebar()
        self.sidebar.focus_devices()
