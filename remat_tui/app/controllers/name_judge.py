"""Provides NameJudge: which checkpoint_names spare no recompute when saved
alone where the Names list's toggles apply (core/search/notes/verdicts.py), measured
in a background thread once per target, place and the rest of the
configuration, and kept (at most LIMIT places).

Owned by the App (not a mixin): `judge(analysis, scope)` starts the work when
it is not known yet, `verdicts(analysis, scope)` reads what is known, and the
App handles `NamesJudged` by redrawing the Names list and its notes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.app import App
from textual.message import Message

from remat_tui.core.runtime.lru import LRU
from remat_tui.core.setup import policies

if TYPE_CHECKING:
    from remat_tui.core.model import Analysis
    from remat_tui.core.places import Site
    from remat_tui.registry import Target

LIMIT = 32


@dataclass
class NamesJudged(Message):
    key: tuple
    verdicts: dict[str, str] | None  # None: the work stopped (superseded or failed)


class NameJudge:
    def __init__(self, app: App):
        self.app = app  # Textual's: run_worker, post_message
        self.known: LRU[dict[str, str]] = LRU(LIMIT)
        # The place last asked about: work for any other stops at its next
        # analysis (not a Textual cancel, which fails every waiter on the worker).
        self.wanted: tuple | None = None
        self.running: set[tuple] = set()

    def key(self, target: Target, analysis: Analysis, scope: Site | None) -> tuple:
        """The configuration with no name saved where toggles apply (the rest
        of a save_from_both_policies kept): what every verdict there is
        measured against, whatever is toggled now."""
        from remat_tui.core.search.notes.verdicts import place_spec

        function = scope.function if scope is not None else None
        around = place_spec(analysis.config, function, analysis.sites)
        nothing = policies.with_names(around, policies.names_policy([], []))
        if function is None:
            config = analysis.config.with_policy(nothing)
        else:
            config = analysis.config.at_function(analysis.sites, function, nothing)
        return (id(target), function, config)

    def verdicts(
        self, target: Target | None, analysis: Analysis | None, scope: Site | None
    ) -> dict[str, str]:
        if target is None or analysis is None or not analysis.names:
            return {}
        return self.known.get(self.key(target, analysis, scope)) or {}

    def judge(self, target: Target | None, analysis: Analysis | None, scope: Site | None) -> None:
        """Measure the names of `analysis` at `scope`, in the background, unless known."""
        if target is None or analysis is None or not analysis.names:
            return
        key = self.key(target, analysis, scope)
        self.wanted = key
        if self.known.get(key) is not None or key in self.running:
            return
        self.running.add(key)
        names = [n.name for n in analysis.names]
        function = scope.function if scope is not None else None
        sites = analysis.sites

        def work() -> None:
            from remat_tui.core.search.notes.verdicts import name_verdicts

            try:
                verdicts = name_verdicts(
                    target, key[2], names, function, sites, lambda: self.wanted != key
                )
            except Exception:  # cancelled, or the main analysis shows what went wrong
                verdicts = None
            self.app.post_message(NamesJudged(key, verdicts))

        self.app.run_worker(work, thread=True, group="names", exit_on_error=False)

    def pause(self) -> None:
        """Stop the work under way at its next analysis (a trace the user asked
        for needs the CPU); `judge` starts it again."""
        self.wanted = None

    def store(self, message: NamesJudged) -> None:
        self.running.discard(message.key)
        if message.verdicts is not None:
            self.known.put(message.key, message.verdicts)
