"""Provides Loaded: what the App knows about the file it loaded, as one frozen
value: the target started and the file's others, the devices, the Policies
list, the analysis shown, how many times the file was imported again, why it
could not be loaded, and what the command line asked for and could not have.

The App holds it as a reactive (`RematApp.loaded`) and replaces it whole
(`dataclasses.replace`) when something changes; what paints the main screen
and what turns the user's requests into a new `wanted` read it through a
Scene (app/state/scene.py). Compared by identity: a new value is a change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from remat_tui.core.model import Analysis
from remat_tui.core.setup import policies
from remat_tui.registry import Target

_NOTHING: Mapping = MappingProxyType({})


@dataclass(frozen=True, eq=False)
class Loaded:
    target: Target | None = None  # the Target started (None before one is)
    # every target of the file, by name
    targets: Mapping[str, Target] = field(default_factory=lambda: _NOTHING)
    devices: tuple[str, ...] = ()  # the Device list
    # the Policies list: the built-ins, the target's own, the specs typed
    listed: Mapping[str, policies.PolicySpec] = field(default_factory=lambda: _NOTHING)
    shown: Analysis | None = None  # the Analysis shown (None before the first)
    reloads: int = 0  # the file's imports since the first: part of every request key
    load_error: str | None = None  # why the file could not be loaded, while it cannot
    # What the command line asked for and could not have (an unknown policy or
    # device): said with the first analysis (start_warnings until it is shown),
    # then kept while it is shown (launch_warnings).
    start_warnings: tuple[str, ...] = ()
    launch_warnings: tuple[str, ...] = ()

    def listing(self, *specs: policies.PolicySpec) -> Loaded:
        """The same, with `specs` added to the Policies list (specs typed)."""
        fresh = {s.canonical: s for s in specs if s.canonical not in self.listed}
        return replace(self, listed=frozen({**self.listed, **fresh})) if fresh else self

    def warned(self, warnings: Iterable[str]) -> Loaded:
        """The same, with more to say with the next analysis shown."""
        return replace(self, start_warnings=(*self.start_warnings, *warnings))


def frozen(mapping: Mapping) -> Mapping:
    """A read-only view of a copy of `mapping`: the value cannot change under its holder."""
    return MappingProxyType(dict(mapping))
