"""Provides the command palette: every key's action, plus any typed policy spec."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from remat_tui.core import policies
from remat_tui.errors import RematError


class RematCommands(Provider):
    def _commands(self):
        app = self.app
        out = [
            (f"Policy: {s}", partial(app.apply_policy, s), f"analyse under {s}")
            for s in app.policy_specs
        ]
        out += [
            (f"Cycle name: {n}", partial(app.cycle_name, n), "recompute → save → offload")
            for n in app.known_names()
        ]
        out += [
            ("Choose device", app.action_pick_device, "re-analyse on another device"),
            ("Export report", app.action_export, "html, md, json or an SVG screenshot"),
            ("Help: keys", app.action_help, "every key"),
        ]
        return out

    async def discover(self) -> Hits:
        for title, callback, help_text in self._commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, callback, help_text in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
        target = self.app.target
        if target is not None and "(" in query or query.strip() in policies.SIMPLE:
            try:
                spec = policies.parse(query, target.policies if target else None)
            except RematError:
                return
            yield Hit(
                1.0,
                f"Apply policy {spec.canonical}",
                partial(self.app.apply_policy, spec.canonical),
                help="typed spec",
            )
