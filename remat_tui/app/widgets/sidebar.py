"""Provides the Sidebar: the Policies, Sites, Names and Device lists.

The sidebar only shows what the App gives it and says what the user picked:
the App calls `show_policies`, `show_names` and `show_device`, and handles
`Sidebar.PolicyChosen`, `Sidebar.NameChosen` and `Sidebar.DeviceChosen`. Each
list is an OptionList relabelled in place by `relabel`; a further list (one row
per item, an id and a label each) is one more OptionList in `compose`, a
`show_*` method and a message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from remat_tui.core.units import human_bytes, human_flops

if TYPE_CHECKING:
    from collections.abc import Set as AbstractSet

    from textual.widget import Widget

    from remat_tui.core.model import NamedValue
    from remat_tui.core.places import Site

NAME_MARKS = {"recompute": "R", "save": "S", "offload": "O"}


def _id(option: Option) -> str:
    """An option's id: each the lists hold is given one (a spec, a device, a
    site's id, a name)."""
    assert option.id is not None
    return option.id


def policy_label(index: int, spec: str, current: bool) -> str:
    key = str(index) if index < 10 else " "
    short = spec if len(spec) <= 26 else spec[:25] + "…"
    return f"{'▶' if current else ' '}{key} {short}"


SPARES_NONE = "⊘"  # marks a name whose saving spares (almost) no recompute
NO_NAMES = "no checkpoint_name"  # fits the narrow sidebar (24 cells, 20 inside)
NO_NAMES_ID = "\x00no names"  # the id of that line: never a name (JAX's are strings typed in code)
NAMES_LEGEND = "R recompute · S save · O offload"


def name_label(
    name: str, states: dict[str, str], info: NamedValue | None, in_vain: bool = False
) -> str:
    """`info` is the shown analysis's NameInfo for `name`, or None; `in_vain`:
    saving it alone spares (almost) no recompute (core/search/notes/verdicts.py)."""
    mark = NAME_MARKS[states.get(name, "recompute")] if states else "·"
    size = ""
    if info is not None:
        # What saving the name costs in all: every tagged value, once per scan
        # iteration (a block scanned 24 times saves it 24 times); ×N how many.
        runs = info.total_bytes // info.bytes if info.bytes else info.count
        times = f" ×{runs}" if runs > 1 else ""
        size = f" {human_bytes(info.total_bytes)}{times}"
    return f"{mark} {name}{f' {SPARES_NONE}' if in_vain else ''}{size}"


def site_label(site: Site) -> str:
    """Two lines: `*1 ×24 block model.py:93` (`*` when the analysis overrides
    the code's policy; the trip count before the name, so that a long name,
    `Encoder1DBlock.__call__`, is what the list's ellipsis cuts, never `×12`),
    then `↻13.8 GFLOP save mlp_hidden`: the forward work the backward pass
    re-runs at the site (↻, as the backward pane marks it), first because it
    is what changes as the site's policy is cycled, then the policy in force
    there (a names policy as its names; a long one ends in the ellipsis)."""
    times = f" ×{site.trip_count}" if site.trip_count else ""
    mark = "*" if site.override is not None else " "
    where = f" {site.source.where()}" if site.source else ""
    again = site.flops.recompute if site.flops is not None else None
    cost = f"↻{human_flops(again)} " if again is not None else ""
    spec = site.effective_spec  # None for a policy read off the code as custom:<name>
    policy = spec.short() if spec is not None else site.effective
    return f"{mark}{site.id}{times} {site.function}{where}\n   {cost}{policy}"


def focus_now(widget: Widget) -> None:
    """Focus `widget` before the next key is handled. Widget.focus() defers it, so
    keys typed ahead (`d` `down` `enter`) went to the widget focused before."""
    widget.screen.set_focus(widget)


def relabel(options: OptionList, labels: list[tuple[str, str]], current: str | None = None) -> None:
    """Make `options` show `labels` (id, prompt), rebuilding only if the ids changed
    (rebuilding an OptionList re-lays out the screen), and highlight the id
    `current` unless the list has the focus (never move the user's own cursor).
    Prompts are plain text (Content), never markup: names are the user's strings."""
    ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
    wanted = [i for i, _ in labels]
    if ids != wanted:
        highlighted = options.highlighted
        options.clear_options()
        options.add_options([Option(Content(prompt), id=i) for i, prompt in labels])
        if labels:
            options.highlighted = min(highlighted or 0, len(labels) - 1)
    else:
        for index, (_, prompt) in enumerate(labels):
            if str(options.get_option_at_index(index).prompt) != prompt:
                options.replace_option_prompt_at_index(index, Content(prompt))
    if current in wanted and not options.has_focus:
        options.highlighted = wanted.index(current)


class Sidebar(Vertical):
    """The lists on the left: policies to switch to, names to cycle, the device."""

    @dataclass
    class PolicyChosen(Message):
        """The user selected a policy in the Policies list."""

        spec: str

    @dataclass
    class SiteChosen(Message):
        """The user selected a checkpoint site (to cycle its policy)."""

        site: int

    @dataclass
    class NameChosen(Message):
        """The user selected a checkpoint_name in the Names list (to cycle it)."""

        name: str

    @dataclass
    class DeviceChosen(Message):
        """The user selected a device in the Device list."""

        device: str

    def compose(self) -> ComposeResult:
        yield OptionList(id="policies")
        yield OptionList(id="sites")
        yield OptionList(id="names")
        # A list in place, not a dialog: opening and closing a screen lays the
        # whole screen out again, and devices are switched often.
        yield OptionList(id="devices")

    def on_mount(self) -> None:
        self.query_one("#policies").border_title = "Policies"
        sites = self.query_one("#sites")
        sites.border_title = "Sites"
        sites.border_subtitle = "s focus · space/0-9 set"
        sites.display = False
        names = self.query_one("#names")
        names.border_title = "Names"
        names.border_subtitle = NAMES_LEGEND
        devices = self.query_one("#devices")
        devices.border_title = "Device"
        devices.border_subtitle = "d focus · enter picks"

    # ---- what the App shows here ---------------------------------------------------------

    def show_policies(self, specs: Sequence[str], current: str | None) -> None:
        """List `specs` (keys 0-9 for the first ten), marking and highlighting
        `current`; a current policy not in `specs` (composed from names) is shown
        last, without a key, so the list always shows what is applied."""
        options = self.query_one("#policies", OptionList)
        listed = [(s, policy_label(i, s, s == current)) for i, s in enumerate(specs)]
        if current is not None and current not in specs:
            listed.append((current, policy_label(10, current, True)))
        relabel(options, listed, current)

    def show_sites(self, sites: Sequence[Site]) -> None:
        """List the shown analysis's checkpoint sites; the list hides when there are none."""
        options = self.query_one("#sites", OptionList)
        options.display = bool(sites)
        relabel(options, [(str(s.id), site_label(s)) for s in sites])

    @property
    def sites_focused(self) -> bool:
        return self.query_one("#sites", OptionList).has_focus

    @property
    def highlighted_site(self) -> int | None:
        sites = self.query_one("#sites", OptionList)
        if not sites.display or sites.highlighted is None:
            return None
        return int(_id(sites.get_option_at_index(sites.highlighted)))

    def focus_sites(self) -> bool:
        """Focus the Sites list; False when the function has no sites."""
        sites = self.query_one("#sites", OptionList)
        if sites.display:
            focus_now(sites)
        return sites.display

    def names_scope(self, scope: str | None) -> None:
        """Say where name toggles apply: outer policy, or the sites of one function."""
        names = self.query_one("#names")
        names.border_title = f"Names at {scope}" if scope else "Names"

    def show_names(
        self,
        names: Sequence[str],
        states: dict[str, str],
        infos: Iterable[NamedValue],
        in_vain: AbstractSet[str] = frozenset(),
        analysed: bool = True,
    ) -> None:
        """List `names` with their state (R S O, or · when `states` is empty),
        for those in `infos` (the shown analysis's NameInfos) their sizes, and
        ⊘ on those in `in_vain` (saving them spares no recompute). With no
        names once the code is `analysed`, one line says so (not an empty box)."""
        info = {n.name: n for n in infos}
        options = self.query_one("#names", OptionList)
        if not names:
            relabel(options, [(NO_NAMES_ID, NO_NAMES)] if analysed else [])
            if analysed:
                options.disable_option(NO_NAMES_ID)  # a line to read, not a name to cycle
            options.border_subtitle = ""
            return
        relabel(options, [(n, name_label(n, states, info.get(n), n in in_vain)) for n in names])
        # The border is narrow: the R/S/O legend shortens to make room for ⊘'s.
        options.border_subtitle = f"R S O · {SPARES_NONE} spares none" if in_vain else NAMES_LEGEND

    def show_device(self, devices: Sequence[str], current: str | None) -> None:
        """List `devices`, marking `current` (analyses are cached per device)."""
        options = self.query_one("#devices", OptionList)
        relabel(options, [(d, f"{'●' if d == current else ' '} {d}") for d in devices], current)

    def focus_devices(self) -> None:
        focus_now(self.query_one("#devices", OptionList))

    # ---- the Names list, for the App's keys ----------------------------------------------

    @property
    def has_names(self) -> bool:
        options = self.query_one("#names", OptionList)
        return options.option_count > 0 and options.get_option_at_index(0).id != NO_NAMES_ID

    @property
    def names_focused(self) -> bool:
        return self.query_one("#names", OptionList).has_focus

    @property
    def highlighted_name(self) -> str | None:
        names = self.query_one("#names", OptionList)
        if names.highlighted is None or not self.has_names:
            return None
        return names.get_option_at_index(names.highlighted).id

    def focus_names(self) -> None:
        focus_now(self.query_one("#names", OptionList))

    # ---- selections, passed on to the App ------------------------------------------------

    @on(OptionList.OptionSelected, "#policies")
    def _policy_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.PolicyChosen(_id(event.option)))

    @on(OptionList.OptionSelected, "#devices")
    def _device_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.DeviceChosen(_id(event.option)))

    @on(OptionList.OptionSelected, "#sites")
    def _site_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.SiteChosen(int(_id(event.option))))

    @on(OptionList.OptionHighlighted, "#sites")
    def _site_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self.post_message(self.SiteHighlighted())

    class SiteHighlighted(Message):
        """Another site is highlighted: name toggles now apply there."""

    @on(OptionList.OptionSelected, "#names")
    def _name_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.NameChosen(_id(event.option)))
