"""Provides the keys: MAIN_KEYS, the main screen's (app/screens/main_screen.py; most
run the App's actions), and APP_KEYS, help and quit, which work over every
screen. BINDINGS is the list they come from, in the order the footer and the
`?` help list them (app/screens/help.py): a shown binding's tooltip, else its
description, is its line there, so the tooltip is written for a reader of the
help."""

from __future__ import annotations

from dataclasses import replace

from textual.binding import Binding

BINDINGS = [
    Binding("0", "policy(0)", "policy", key_display="0-9"),
    *(Binding(str(i), f"policy({i})", show=False) for i in range(1, 10)),
    Binding("space", "cycle_name", "cycle name"),
    Binding("n", "focus_names", "names", show=False),
    Binding("s", "focus_sites", "sites", show=False),
    Binding("r", "focus_residuals", "residuals", show=False),
    Binding("o", "sort_residuals", "sort by bytes", show=False),
    Binding("y", "toggle_story", "why saved", show=False),  # help: app/screens/help.py
    Binding("c", "compare", "compare"),
    Binding("h", "fit", "how big a batch fits", show=False),  # help: app/screens/help.py
    Binding("p", "toggle_compile", "compile: peak", show=False),
    Binding("x", "toggle_measure", "measure", show=False),  # help: app/screens/help.py
    Binding(
        "w",
        "memory",
        "where the peak goes",
        show=False,
        tooltip="where the compiled peak goes (p compiles first): live bytes over XLA's "
        "schedule, the buffers at the peak with category and line",
    ),
    Binding("t", "pick_target", "target", show=False),
    Binding(
        "b",
        "toggle_sidebar",
        "lists",
        tooltip="hide or show the sidebar's lists (hidden below 100 columns)",
    ),
    Binding(
        "d",
        "pick_device",
        "device",
        tooltip="focus the Device list (enter picks one; analyses are cached per device)",
    ),
    Binding("e", "export", "export"),
    Binding("question_mark", "help", "help", key_display="?"),
    Binding("q", "quit", "quit"),
    # Not Textual's "press q to quit" hint: here ctrl+c quits, as in a shell
    # (a focused text field still copies with it; the app binding comes after).
    Binding("ctrl+c", "quit", "quit", show=False),
    # After quit, so that at 80-100 columns the footer still shows ? and q.
    Binding(
        "f",
        "suggest",
        "suggest",
        tooltip="suggest: type a memory budget (2GiB, 512MiB, 1.5e9); the configuration "
        "with the least recompute that fits, and the code to paste (residual bytes, or "
        "the compiled peak while p is on)",
    ),
    Binding(
        "m",
        "mark",
        "mark",
        tooltip="mark the shown configuration as A, to compare with another (v)",
    ),
    Binding(
        "v",
        "diff",
        "diff",
        tooltip="diff: residuals only in the marked A, only in the shown B and in both, "
        "with the byte and recompute deltas",
    ),
]

APP_KEYS = [b for b in BINDINGS if b.action in ("help", "quit")]
# The main screen's own actions: they act on its widgets alone. Every other key
# is the App's action (it needs what the App holds: the target, the analysis
# shown, the policies listed), and the main screen lists help and quit too, so
# that its footer keeps BINDINGS' order (the App's own come after a screen's).
SCREEN_ACTIONS = (
    "cycle_name",
    "focus_names",
    "focus_sites",
    "focus_residuals",
    "sort_residuals",
    "toggle_sidebar",
    "pick_device",
    "toggle_story",
)
# The keys that open a screen over the main screen are priority bindings: the
# App runs them itself, before the key reaches the focused widget, and handles
# no other key until that screen is mounted and focused (app/controllers/opening.py), so
# keys typed straight after (a budget after `f` or `h`) go to it. Otherwise
# they were already queued at the main screen's focused widget, and lost.
OPENS_A_SCREEN = ("compare", "fit", "suggest", "diff", "memory", "export", "pick_target")
MAIN_KEYS = [
    b
    if b.action in SCREEN_ACTIONS
    else replace(b, action=f"app.{b.action}", priority=b.action in OPENS_A_SCREEN)
    for b in BINDINGS
]
