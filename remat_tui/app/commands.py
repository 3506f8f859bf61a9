"""Provides the command palette: every key's action, plus any typed policy spec
(added to the Policies list when applied), whole specs completing a partial one,
and "did you mean" for a misspelt one."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from remat_tui.app.hints import completions, did_you_mean
from remat_tui.core.setup import policies
from remat_tui.errors import RematError


def keep_typed(app, before: list[str]) -> None:
    """After `start` reset the Policies list for a (re)loaded target: add back the
    specs typed earlier (`before` was the list) that still parse for it."""
    for spec in before:
        if spec in app.policy_specs:
            continue
        try:
            policies.parse(spec, app.target.policies)
        except RematError:
            continue  # a policy the old code declared and the new does not
        app.policy_specs.append(spec)
    app.view.refresh_sidebar()


def apply_typed(app, spec: str) -> None:
    """Apply a typed spec and keep it in the Policies list (a number key if one is
    free), so the list shows what is applied."""
    if spec not in app.policy_specs:
        app.policy_specs.append(spec)
    app.apply_policy(spec)


class RematCommands(Provider):
    @property
    def over_main_screen(self) -> bool:
        """Whether the palette was opened over the main screen: the commands act
        on what it shows, so over another screen (compare, suggest, diff) only
        help is offered, as only help and quit keys work there."""
        return self.screen is self.app.screen_stack[0]

    def _commands(self):
        app = self.app
        if not self.over_main_screen:
            return [("Help: keys", app.action_help, "every key")]
        out = [
            (f"Policy: {s}", partial(app.apply_policy, s), f"analyse under {s}")
            for s in app.policy_specs
        ]
        out += [
            (
                f"Cycle name: {n}",
                partial(app.main_screen.cycle_name, n),
                "recompute → save → offload",
            )
            for n in app.analyses.names_seen()
        ]
        for site in (app.shown.sites if app.shown else [])[:8]:
            out += [
                (
                    f"Site {site.id} ({site.function}): {s}",
                    partial(app.main_screen.apply_site, site.id, s),
                    "set the policy of this jax.checkpoint in the code",
                )
                for s in app.policy_specs
            ]
        if len(app.targets) > 1:
            out += [
                (
                    f"Open target: {name}",
                    partial(app.start, t),
                    "analyse another target of the file",
                )
                for name, t in app.targets.items()
                if app.target is None or name != app.target.name
            ]
        main = app.main_screen  # the keys' actions are the main screen's
        out += [
            ("Compare every configuration", main.action_compare, "c: costs, Pareto front, chart"),
            (
                "How big a batch fits",
                main.action_fit,
                "x: the largest batch per configuration under a budget, and its examples/s",
            ),
            (
                "Suggest: fit a memory budget",
                main.action_suggest,
                "f: the least recompute that fits a budget you type (2GiB, 512MiB)",
            ),
            (
                "Where the peak goes",
                main.action_memory,
                "w: live bytes over XLA's schedule, the buffers at the peak (p compiles first)",
            ),
            ("Mark this configuration as A", main.action_mark, "m: for the diff (v)"),
            (
                "Diff: marked A against the shown B",
                main.action_diff,
                "v: residuals only in A, only in B, in both; byte and FLOP deltas",
            ),
            ("Choose device", main.action_pick_device, "d: the Device list; enter picks one"),
            ("Hide or show the sidebar", main.action_toggle_sidebar, "b"),
            ("Export report", main.action_export, "html, md, json or an SVG screenshot"),
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
        if target is None or not self.over_main_screen:
            return
        if query.startswith("site ") and ":" in query:
            yield self._site_hit(query, target)
            return
        try:
            spec = policies.parse(query, target.policies)
        except RematError as exc:
            meant = did_you_mean(query, target.policies)
            if meant is not None:
                yield Hit(
                    0.9,
                    Content(f"Did you mean {meant}?"),
                    partial(apply_typed, self.app, meant),
                    help=f"select to apply it · {exc.message}",
                )
            # A partial spec (`save_on`): whole specs, with the function's names.
            done = completions(query, self.app.analyses.names_seen(), target.policies)
            for rank, text in enumerate(s for s in done[:12] if s not in self.app.policy_specs):
                yield Hit(
                    0.8 - rank / 100,
                    Content(f"Apply policy {text}"),
                    partial(apply_typed, self.app, text),
                    help="completes what you typed",
                )
            if "(" in query and meant is None:  # an attempt at a spec: say what is wrong
                yield Hit(
                    0.5,
                    Content(f"Not a policy: {exc.message}"),
                    partial(self.app.view.show_error, exc.message),
                    help="select to keep this message on screen",
                )
            return
        if spec.canonical not in self.app.policy_specs:  # those are listed above already
            yield Hit(
                1.0,
                Content(f"Apply policy {spec.canonical}"),
                partial(apply_typed, self.app, spec.canonical),
                help="typed spec: added to the Policies list",
            )

    def _site_hit(self, query: str, target) -> Hit:
        """`site block: save_only_these_names('h')` or `site 1: as_written`."""
        from remat_tui.core.setup.config import parse_site_option

        key_text, _, spec_text = query.removeprefix("site ").partition(":")
        try:
            key, _ = parse_site_option(f"{key_text.strip()}=x")
            spec = policies.parse(spec_text, target.policies)
        except RematError as exc:
            return Hit(
                0.5,
                Content(f"Not a site policy: {exc.message}"),
                partial(self.app.view.show_error, exc.message),
                help="select to keep this message on screen",
            )
        return Hit(
            1.0,
            Content(f"Set site {key} to {spec.canonical}"),
            partial(self.app.main_screen.apply_site, key, spec.canonical),
            help="typed site policy",
        )
