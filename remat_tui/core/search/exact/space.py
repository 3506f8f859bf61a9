"""Provides `Space`: the decisions of the exact search (Contract 12) and the
configuration each assignment of them is.

A place is where a policy can be chosen on its own: each checkpointed
function, or, where the traced program holds several calls of one function
(a Python loop calling it: one remat equation, so one site, per call), each
call; in code with no checkpoint, the outer policy. A decision is one
`checkpoint_name` saved or offloaded at one place (offloaded only where the
device's compile has host memory for it, `xla.compile.host_memory`); a name
neither saved nor offloaded is recomputed. An assignment is the set of
decisions taken; at each place it is the policy
`save_and_offload_only_these_names` (or `save_only_these_names`) of them.

Code with no `checkpoint_name` but several places (calls of a checkpointed
function, or several checkpointed functions) has no name to decide: there a
decision is a whole policy at one place (a built-in or the target's own;
at most one per place), and a place with none taken recomputes everything
(nothing_saveable). Beyond POLICY_DECISIONS_AT_MOST of those, the calls of
one function share one policy (each function is one place), and the
certificate says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING

from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config, SiteKey

if TYPE_CHECKING:
    from remat_tui.core.places import Site

SAVE, OFFLOAD, RECOMPUTE, POLICY = "save", "offload", "recompute", "policy"
# Whole-policy decisions the model takes before the calls of a function
# share one policy (a decision is compiled alone first: this many compiles).
POLICY_DECISIONS_AT_MOST = 40


@dataclass(frozen=True)
class Place:
    """A checkpointed function (`key` its name), one call of it (`key` its
    site id), or the outer policy (`key` None)."""

    key: SiteKey | None
    function: str | None
    call: int | None = None  # which call of the function, from 0, where calls are told apart

    @property
    def site(self) -> tuple[str, SiteKey]:
        """(the function, the key its override takes): every place but the
        outer policy's, which is no site."""
        if self.function is None or self.key is None:
            raise ValueError("the outer policy is no site")
        return self.function, self.key

    @property
    def label(self) -> str:
        if self.key is None:
            return "the outer policy"
        if self.call is None:
            return str(self.function)
        return f"{self.function}, call {self.call + 1} (site {self.key})"


@dataclass(frozen=True)
class Decision:
    """A name saved or offloaded at a place, or (state POLICY) a whole
    policy there (`policy`; `name` its spelling)."""

    place: Place
    name: str
    state: str  # SAVE, OFFLOAD or POLICY
    policy: policies.PolicySpec | None = None  # the policy, for a POLICY decision

    @property
    def label(self) -> str:
        if self.state == POLICY:
            return f"{self.name} at {self.place.label}"
        return f"{self.state} {self.name} at {self.place.label}"


class Space:
    """Every decision at every place, and the configurations of assignments.
    `whole`: the policies a place may take whole where there is no name to
    decide (the module doc)."""

    def __init__(
        self,
        base: Config,
        sites: Sequence[Site],
        names: list[str],
        offload: bool,
        whole: Sequence[policies.PolicySpec] = (),
    ) -> None:
        self.base, self.sites = base, list(sites)
        self.offload = offload
        self.names = list(names)
        self.states = (SAVE, OFFLOAD) if offload else (SAVE,)
        # Whole policies where no name can be decided and the code has
        # checkpoints at more than one place; nothing_saveable is what a
        # place with no decision does.
        nothing = policies.same_decisions(policies.names_policy([], []))
        whole = [] if names or not sites else [
            w for w in dict.fromkeys(whole)
            if policies.same_decisions(w) != nothing and (offload or not _offloads(w))
        ]  # fmt: skip
        self.places = places_of(self.sites)
        self.shared: list[str] = []  # functions whose calls were made one place
        if whole and len(self.places) * len(whole) > POLICY_DECISIONS_AT_MOST:
            self.shared = list(dict.fromkeys(p.site[0] for p in self.places if p.call is not None))
            self.places = places_of(self.sites, per_call=False)
        if whole and len(self.places) < 2:
            whole = []  # one place: its policies are listed whole beside the model
        self.whole = list(whole)
        self.decisions = [
            Decision(place, name, state)
            for place in self.places
            for name in self.names
            for state in self.states
        ] + [Decision(place, w.canonical, POLICY, w) for place in self.places for w in self.whole]

    @property
    def noun(self) -> str:
        """What a decision is, in words: a name's state, or a whole policy."""
        return "policy decision" if self.whole else "name decision"

    @property
    def empty_words(self) -> str:
        """The assignment with no decision taken, in words."""
        return "nothing_saveable at every place" if self.whole else "every name recomputed"

    @property
    def per_call(self) -> list[str]:
        """The functions whose calls are decided one by one."""
        return list(dict.fromkeys(p.site[0] for p in self.places if p.call is not None))

    def keep(self, indices: Iterable[int]) -> None:
        """Keep only these decisions (the others change nothing)."""
        kept = set(indices)
        self.decisions = [d for i, d in enumerate(self.decisions) if i in kept]

    def exclusive(self) -> list[tuple[int, ...]]:
        """Groups of decisions an assignment takes at most one of: the states
        of one name at one place."""
        groups: dict[tuple[Place, str], list[int]] = {}
        for i, d in enumerate(self.decisions):
            groups.setdefault(_group(d), []).append(i)
        return [tuple(g) for g in groups.values() if len(g) > 1]

    def size(self) -> int:
        """How many assignments the decisions make."""
        per_name: dict[tuple[Place, str], int] = {}
        for d in self.decisions:
            per_name[_group(d)] = per_name.get(_group(d), 1) + 1
        return prod(per_name.values())

    def config(self, assignment: Iterable[int]) -> Config:
        """The configuration of an assignment: at each place the names it
        saves and offloads (calls of one function that all get one policy
        are written as the function's)."""
        chosen = [self.decisions[i] for i in assignment]
        specs: dict[Place, policies.PolicySpec] = {}
        for place in self.places:
            whole = [d.policy for d in chosen if d.place == place and d.policy is not None]
            saved = sorted(d.name for d in chosen if d.place == place and d.state == SAVE)
            offloaded = sorted(d.name for d in chosen if d.place == place and d.state == OFFLOAD)
            specs[place] = whole[0] if whole else policies.names_policy(saved, offloaded)
        if self.places[0].key is None:
            return self.base.with_policy(specs[self.places[0]])
        overrides = dict(self.base.site_specs)
        for function in dict.fromkeys(p.site[0] for p in self.places):
            mine = [p for p in self.places if p.function == function]
            alike = {specs[p] for p in mine}
            if len(alike) == 1:
                for p in mine:
                    overrides.pop(p.site[1], None)
                overrides[function] = alike.pop()
            else:
                overrides.pop(function, None)
                overrides.update({p.site[1]: specs[p] for p in mine})
        return self.base.with_sites(overrides)


def places_of(sites: Sequence[Site], per_call: bool = True) -> list[Place]:
    """Each checkpointed function, or (`per_call`) each of its calls where
    the program holds several (each its own site); the outer policy where
    there is none."""
    if not sites:
        return [Place(None, None)]
    by_function: dict[str, list[Site]] = {}
    for s in sites:
        by_function.setdefault(s.function, []).append(s)
    out = []
    for function, mine in by_function.items():
        if len(mine) == 1 or not per_call:
            out.append(Place(function, function))
        else:
            out += [Place(s.id, function, call) for call, s in enumerate(mine)]
    return out


def _group(d: Decision) -> tuple[Place, str]:
    """The decisions an assignment takes at most one of: the states of one
    name at one place; the whole policies at one place."""
    return (d.place, POLICY if d.state == POLICY else d.name)


def _offloads(spec: policies.PolicySpec) -> bool:
    """Whether a policy sends anything to host memory (a declared one is
    opaque: taken as it is)."""
    return not spec.declared and spec.recomputing_offloads() != spec
