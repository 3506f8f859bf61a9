"""Provides the command palette: every key's action (ACTIONS, built from the
key table in app/keys.py), plus any typed policy spec (added to the Policies
list when applied), whole specs completing a partial one, and "did you mean"
for a misspelt one.

What it offers comes from the App in one value (`PaletteChoices`, from
`RematApp.palette_choices`); what the user picks goes up as a message
(app/messages.py) or runs a key's action.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from remat_tui.app.hints import completions
from remat_tui.app.keys import ACTIONS
from remat_tui.app.messages import ErrorShown, NameCycled, PolicyWanted, SiteWanted, TargetWanted
from remat_tui.core.setup import policies
from remat_tui.errors import RematError

if TYPE_CHECKING:
    from textual.message import Message

    from remat_tui.app.state.loaded import Loaded

SITES_OFFERED = 8  # sites whose policies are offered one by one


class _Offering(Protocol):
    def palette_choices(self) -> PaletteChoices: ...


@dataclass(frozen=True)
class PaletteChoices:
    """What the palette offers over the main screen."""

    policies: dict[str, policies.PolicySpec]  # the Policies list, parsed
    names: tuple[str, ...]  # every checkpoint_name seen
    sites: tuple  # the shown analysis's sites
    targets: tuple[str, ...]  # the file's targets, when it has several
    target: str | None  # the one shown
    declared: dict | None  # its own policies (None: nothing loaded)

    @classmethod
    def of(cls, loaded: Loaded, names_seen: Iterable[str]) -> PaletteChoices:
        """What is offered with `loaded` (app/state/loaded.py) and the names seen."""
        target = loaded.target
        return cls(
            policies=dict(loaded.listed),
            names=tuple(names_seen),
            sites=tuple(loaded.shown.sites if loaded.shown else ()),
            targets=tuple(loaded.targets) if len(loaded.targets) > 1 else (),
            target=target.name if target else None,
            declared=target.policies if target else None,
        )


class RematCommands(Provider):
    @property
    def over_main_screen(self) -> bool:
        """Whether the palette was opened over the main screen: the commands act
        on what it shows, so over another screen (compare, suggest, diff) only
        help is offered, as only help and quit keys work there."""
        return self.screen is self.app.screen_stack[0]

    def _choices(self) -> PaletteChoices:
        """RematApp's choices (the palette runs in it; this module cannot name
        the App class: app/main.py imports this one)."""
        return cast(_Offering, self.app).palette_choices()

    def _run(self, action: str) -> Callable:
        return partial(self.app.run_action, action, self.screen)

    def _post(self, message: Message) -> Callable:
        return partial(self.app.post_message, message)

    def _commands(self) -> list[tuple[str, Callable, str]]:
        if not self.over_main_screen:
            return [("Help: keys", self._run("app.help"), "every key")]
        c = self._choices()
        out = [
            (f"Policy: {s}", self._post(PolicyWanted(spec)), f"analyse under {s}")
            for s, spec in c.policies.items()
        ]
        out += [
            (f"Cycle name: {n}", self._post(NameCycled(n)), "recompute → save → offload")
            for n in c.names
        ]
        for site in c.sites[:SITES_OFFERED]:
            out += [
                (
                    f"Site {site.id} ({site.function}): {s}",
                    self._post(SiteWanted(site.id, spec)),
                    "set the policy of this jax.checkpoint in the code",
                )
                for s, spec in c.policies.items()
            ]
        out += [
            (
                f"Open target: {name}",
                self._post(TargetWanted(name)),
                "analyse another target of the file",
            )
            for name in c.targets
            if name != c.target
        ]
        return out + [(title, self._run(action), text) for title, action, text in ACTIONS]

    async def discover(self) -> Hits:
        for title, callback, help_text in self._commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, callback, help_text in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
        if not self.over_main_screen:
            return
        c = self._choices()
        if c.declared is None:
            return
        if query.startswith("site ") and ":" in query:
            yield self._site_hit(query, c.declared)
            return
        try:
            spec = policies.parse(query, c.declared)
        except RematError as exc:
            for hit in self._repairs(query, exc.message, c):
                yield hit
            return
        if spec.canonical not in c.policies:  # those are listed above already
            yield Hit(
                1.0,
                Content(f"Apply policy {spec.canonical}"),
                self._post(PolicyWanted(spec, listed=True)),
                help="typed spec: added to the Policies list",
            )

    def _repairs(self, query: str, error: str, c: PaletteChoices) -> list[Hit]:
        """For a query that does not parse: what was probably meant, whole specs
        completing a partial one, and what is wrong with an attempt at a spec."""
        hits = []
        meant = policies.did_you_mean(query, c.declared)
        if meant is not None:
            hits.append(
                Hit(
                    0.9,
                    Content(f"Did you mean {meant.canonical}?"),
                    self._post(PolicyWanted(meant, listed=True)),
                    help=f"select to apply it · {error}",
                )
            )
        # A partial spec (`save_on`): whole specs, with the function's names.
        done = completions(query, c.names, c.declared)
        fresh = (s for s in done[:12] if s.canonical not in c.policies)
        for rank, spec in enumerate(fresh):
            hits.append(
                Hit(
                    0.8 - rank / 100,
                    Content(f"Apply policy {spec.canonical}"),
                    self._post(PolicyWanted(spec, listed=True)),
                    help="completes what you typed",
                )
            )
        if "(" in query and meant is None:  # an attempt at a spec: say what is wrong
            hits.append(
                Hit(
                    0.5,
                    Content(f"Not a policy: {error}"),
                    self._post(ErrorShown(error)),
                    help="select to keep this message on screen",
                )
            )
        return hits

    def _site_hit(self, query: str, declared: dict) -> Hit:
        """`site block: save_only_these_names('h')` or `site 1: as_written`."""
        from remat_tui.core.setup.config import parse_site_option

        key_text, _, spec_text = query.removeprefix("site ").partition(":")
        try:
            key, _ = parse_site_option(f"{key_text.strip()}=x")
            spec = policies.parse(spec_text, declared)
        except RematError as exc:
            return Hit(
                0.5,
                Content(f"Not a site policy: {exc.message}"),
                self._post(ErrorShown(exc.message)),
                help="select to keep this message on screen",
            )
        return Hit(
            1.0,
            Content(f"Set site {key} to {spec.canonical}"),
            self._post(SiteWanted(key, spec)),
            help="typed site policy",
        )
