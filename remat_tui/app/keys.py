"""Provides the keys, in one table (KEYS): each key's binding, its footer
word, its command palette entry and its line in the `?` help. The bindings
(BINDINGS, MAIN_KEYS, APP_KEYS), the palette's ACTIONS (app/commands.py) and
the help (app/screens/help.py) are all built from it, so none can drift from
the others (tests/app/test_app_keys.py checks that every binding is in both).

The order is the footer's and the help's: the keys the footer shows first,
then the others.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from textual.binding import Binding, BindingType


@dataclass(frozen=True)
class Key:
    key: str  # Textual's key name
    action: str  # the action it runs (the App's, or the main screen's: SCREEN_ACTIONS)
    footer: str  # its word in the footer
    help: str  # its line in the `?` help
    palette: str | None = None  # its title in the command palette (None: OFFERED_OTHERWISE)
    palette_help: str = ""  # the palette's line under that title
    show: bool = False  # shown in the footer
    display: str | None = None  # how the footer and help write the key (else `key`)

    @property
    def shown_as(self) -> str:
        return self.display or self.key


# Letters a user can guess: a whether the gradients agree (verify), b a
# memory budget (suggest answers it), f how big a batch fits, l the lists,
# c compare, d device, e export, t target, w where the peak goes, y why a
# value is saved (not g: the residual table's vim key for its first row);
# the sidebar's focus keys are their lists' initials (n names, s sites,
# r residuals).
KEYS = (
    Key(
        "0",
        "policy(0)",
        "policy",
        "policy",
        show=True,
        display="0-9",
    ),
    Key(
        "space",
        "cycle_name",
        "cycle name",
        "cycle name",
        show=True,
    ),
    Key(
        "c",
        "opening('compare')",
        "compare",
        "compare",
        "Compare every configuration",
        "c: costs, Pareto front, chart",
        show=True,
    ),
    Key(
        "l",
        "toggle_sidebar",
        "lists",
        "hide or show the sidebar's lists (hidden below 100 columns)",
        "Hide or show the sidebar",
        "l",
        show=True,
    ),
    Key(
        "d",
        "pick_device",
        "device",
        "focus the Device list (enter picks one; analyses are cached per device)",
        "Choose device",
        "d: the Device list; enter picks one",
        show=True,
    ),
    Key(
        "e",
        "opening('export')",
        "export",
        "export",
        "Export report",
        "e: html, md, json or an SVG screenshot",
        show=True,
    ),
    Key(
        "question_mark",
        "help",
        "help",
        "help",
        "Help: keys",
        "?: every key",
        show=True,
        display="?",
    ),
    Key("q", "quit", "quit", "quit", show=True),
    # After quit, so that at 80-100 columns the footer still shows ? and q.
    Key(
        "b",
        "opening('suggest')",
        "suggest",
        "suggest: type a memory budget (2GiB, 512MiB, 1.5e9); the configuration "
        "with the least recompute whose residual bytes fit (while p is on: the fastest "
        "step, estimated, whose compiled peak fits; with x: measured), and the code to paste",
        "Suggest: fit a memory budget",
        "b: the least recompute (p: the fastest step) that fits a budget you type",
        show=True,
    ),
    Key(
        "m",
        "opening('mark')",
        "mark",
        "mark the shown configuration as A, to compare with another (v)",
        "Mark this configuration as A",
        "m: for the diff (v)",
        show=True,
    ),
    Key(
        "v",
        "opening('diff')",
        "diff",
        "diff: residuals only in the marked A, only in the shown B and in both, "
        "with the byte and recompute deltas",
        "Diff: marked A against the shown B",
        "v: residuals only in A, only in B, in both; byte and FLOP deltas",
        show=True,
    ),
    # Not in the footer: the help and the palette list them.
    Key(
        "n",
        "focus_names",
        "names",
        "focus the Names list (shows a hidden sidebar)",
        "Focus the Names list",
        "n: space or enter cycles the highlighted name",
    ),
    Key(
        "s",
        "focus_sites",
        "sites",
        "focus the Sites list (shows a hidden sidebar)",
        "Focus the Sites list",
        "s: enter cycles the highlighted site's policy; 0-9 sets one there",
    ),
    Key(
        "r",
        "focus_residuals",
        "residuals",
        "focus the residual table",
        "Focus the residual table",
        "r: select a residual to see its lines and its story (y)",
    ),
    Key(
        "t",
        "opening('pick_target')",
        "target",
        "open another target of the file",
        "Open another target",
        "t: pick one of the file's targets",
    ),
    Key(
        "f",
        "opening('fit')",
        "how big a batch fits",
        "how big a batch fits a budget you type, for the shown configuration and every one "
        "compare weighs (args=lambda batch=32: ... makes a target scale): batch, peak, "
        "examples/s, a chart against batch",
        "How big a batch fits",
        "f: the largest batch per configuration under a budget, and its examples/s",
    ),
    Key(
        "o",
        "sort_residuals",
        "sort by bytes",
        "sort the residuals by bytes, largest first (again: JAX's order)",
        "Sort residuals by bytes (on/off)",
        "o: largest first; again: JAX's order",
    ),
    Key(
        "y",
        "toggle_story",
        "why saved",
        "why the selected residual is saved: the policy's rule that saved it, the equation "
        "and calls that made it, the backward equations reading it and (p) what XLA made "
        "of it; y again hides it",
        "Why is it saved (on/off)",
        "y: the selected residual's rule, maker, readers and what XLA made of it",
    ),
    Key(
        "p",
        "toggle_compile",
        "compile: peak",
        "compile every analysis shown (never run): the compiled peak per device "
        "leads the status line, residual bytes beside it (p again: off)",
        "Compile what is shown (on/off)",
        "p: the compiled peak per device leads the status line; compare compiles each row",
    ),
    Key(
        "x",
        "toggle_measure",
        "measure",
        "run every analysis shown on its device and time it (p comes on with it; not "
        "a TPU topology): measured beside the estimate; compare and suggest rank by it",
        "Measure on the device (on/off)",
        "x: run each step shown and time it, beside the estimate; compare ranks by it",
    ),
    Key(
        "a",
        "verify",
        "gradients agree?",
        "do the gradients agree (verify): run the configuration shown and the code as written "
        "on its device with the same inputs, and compare the loss and every gradient leaf "
        "(bitwise, and against a tolerance); the verdict above the panes, and where they "
        "differ the decision that moves them; a again cancels it (a TPU topology cannot run it)",
        "Verify: do the gradients agree",
        "a: the shown configuration's loss and gradients against the code as written's, run",
    ),
    Key(
        "w",
        "opening('memory')",
        "where the peak goes",
        "where the compiled peak goes (p compiles first): live bytes over XLA's "
        "schedule, the buffers at the peak with category and line",
        "Where the peak goes",
        "w: live bytes over XLA's schedule, the buffers at the peak (p compiles first)",
    ),
    # Not Textual's "press q to quit" hint: here ctrl+c quits, as in a shell (a
    # focused text field still copies with it; the app binding comes after).
    Key("ctrl+c", "quit", "quit", "quit, as in a shell (a focused text field copies)"),
)

# Keys the palette offers in its own way, not as one ACTIONS entry: a policy
# by its spec ("Policy: …", one entry per listed policy), a name by its name
# ("Cycle name: …", one per name seen), and quit as Textual's own command.
OFFERED_OTHERWISE = ("policy(0)", "cycle_name", "quit")

# The main screen's own actions: they act on its widgets alone. Every other key
# is the App's action (it needs what the App holds: the target, the analysis
# shown, the policies listed; those that open a screen, and mark, are the one
# App action `opening`, over app/controllers/opening.py's OPENERS), and the
# main screen lists help and quit too, so that its footer keeps the table's
# order (the App's own come after a screen's).
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
# no other key until that screen is mounted and focused (app/controllers/opening.py),
# so keys typed straight after (a budget after `f` or `h`) go to it. Otherwise
# they were already queued at the main screen's focused widget, and lost.
OPENS_A_SCREEN = tuple(
    f"opening('{name}')"
    for name in ("compare", "fit", "suggest", "diff", "memory", "export", "pick_target")
)


def _binding(k: Key) -> Binding:
    tooltip = k.help if k.help != k.footer else ""  # the footer's hover: more than its word
    return Binding(k.key, k.action, k.footer, show=k.show, key_display=k.display, tooltip=tooltip)


def _bindings() -> list[Binding]:
    out = []
    for k in KEYS:
        out.append(_binding(k))
        if k.action == "policy(0)":  # 1-9 too: one row, 0-9, in the footer and the help
            out += [Binding(str(i), f"policy({i})", show=False) for i in range(1, 10)]
    return out


BINDINGS = _bindings()
# BindingType: what a Screen's or the App's BINDINGS holds
APP_KEYS: list[BindingType] = [b for b in BINDINGS if b.action in ("help", "quit")]
MAIN_KEYS: list[BindingType] = [
    b
    if b.action in SCREEN_ACTIONS
    else replace(b, action=f"app.{b.action}", priority=b.action in OPENS_A_SCREEN)
    for b in BINDINGS
]
# (title, action, help): the keys' actions, as the command palette lists them
ACTIONS = tuple(
    (
        k.palette,
        ("screen." if k.action in SCREEN_ACTIONS else "app.") + k.action,
        k.palette_help,
    )
    for k in KEYS
    if k.palette is not None
)
