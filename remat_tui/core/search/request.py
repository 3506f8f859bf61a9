"""Provides `Request`: what compare, suggest and fit are asked, resolved once
before a search starts (`search_request`): the target, the configuration
every candidate starts from (the sites and device asked for), the candidates
left out, and whether each is compiled and run. A bad one raises RematError
before anything is traced; fit's search per batch (`fit_optimized`) hands
`suggest_request` the same request at each batch's target.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from remat_tui.core.search.configs.skips import Skip, Skips, parse_skips
from remat_tui.core.setup.config import RUNS, Config
from remat_tui.core.trace.configured import as_target
from remat_tui.core.xla.run.measure import check_measurable
from remat_tui.registry import Target


@dataclass(frozen=True)
class Request:
    """One search's question, less what each search asks besides (a budget, policies)."""

    target: Target
    base: Config  # the code as written, with the sites and on the device asked for
    skips: Skips  # what the user left out (--skip): never `base`
    compiled: bool  # compile each candidate: asked for, or implied by measuring
    runs: int | None  # timed runs of each step measured; None: nothing is run

    @property
    def measured(self) -> bool:
        return self.runs is not None

    def at(self, target: Target) -> Request:
        """The same question of another target (fit's: the one at a batch)."""
        return replace(self, target=target)


def search_request(
    fn: Target | Callable,
    args: tuple | None = None,
    kwargs: dict | None = None,
    *,
    sites: dict | None = None,
    device: str | None = None,
    compiled: bool = False,
    measure: bool = False,
    runs: int = RUNS,
    skip: Sequence[str | Skip] | None = None,
) -> Request:
    """The request of a search's arguments, as the API takes them, checked:
    the sites and skips parsed against the target's declared policies, the
    device resolved to its label, and a device that cannot run steps refused
    when `measure` is asked."""
    target = as_target(fn, args, kwargs)
    base = Config.make(sites=sites, device=device, declared=target.policies)
    skips = parse_skips(skip, target.policies)
    if measure:
        check_measurable(base.device, runs)
    return Request(target, base, skips, compiled or measure, runs if measure else None)
