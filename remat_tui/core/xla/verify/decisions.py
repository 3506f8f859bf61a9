"""Provides the decisions of a configuration, for `verify`'s explanation
(`xla.verify.bisect`, issue 43): `Decision`, `decisions` (what a
configuration changes against the code as written), `configure` (a subset of
them applied), `minimal` (the search for the fewest that differ) and
`Culprit`, what the search found.

The decisions are what the configuration changes against the code as
written: the outer policy, each site's policy, the structure, each at the
finest grain that is still a configuration:
- a names policy (`save_only_these_names`, `save_and_offload_only_these_names`,
  or one half of a `save_from_both_policies`), outer or at a site: one
  decision per checkpoint_name it treats otherwise than the code as written
  (recomputes, offloads or saves it). Outside any site the code as written
  saves every name (it has no outer checkpoint); at a site, a name is as the
  policy written there treats it where that policy decides by name alone
  (a names policy), else saved. The rest of the policy (what no name
  names), where it differs from what is written, is one decision more,
  "the policy with its names as written", which any name's decision brings
  with it. Names are those made in the site's body (`SiteNames`).
- a split structure: its two parts, the first K layers under one policy and
  the rest under the other, where neither part is `as_written` (the part
  not chosen stays as written: `as_written` in its place).
- any other policy, a nested structure: one decision each.

Where the gradients differ and there are several decisions, the smallest
set that moves them past the tolerance is found by applying subsets as
configurations and verifying each (the code as written's run is verify's,
kept): a binary search for the shortest prefix of the decisions that
differs, whose last decision is then needed; repeated with the needed ones
always applied, until they alone differ. That is k·(⌈log2 n⌉ + 1) verifies
at most for k needed decisions of n, and finds a set none of whose
decisions can go, provided adding decisions never undoes a difference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from remat_tui.core.setup import policies
from remat_tui.core.setup.config import AS_WRITTEN, Config, SiteKey
from remat_tui.core.setup.policy_spec import names_part, names_policy, with_names
from remat_tui.core.setup.structure_specs import SPLIT, Structure
from remat_tui.core.xla.verify.leaves import json_number

# Decision kinds: the outer policy whole, a name a names policy treats
# otherwise (outer or at a site), the rest of a names policy, a site's
# policy whole, the structure (or one part of a split).
POLICY, NAME, REST, SITE, STRUCTURE = "policy", "name", "rest", "site", "structure"
SAVE, RECOMPUTE, OFFLOAD = "save", "recompute", "offload"
ACTING = {RECOMPUTE: "recomputing", OFFLOAD: "offloading", SAVE: "saving"}
FIRST, OTHERS = "first", "rest"  # a split's parts (Decision.key)
BisectProgress = Callable[[int, int, Config, str], None]  # (i, total, config, stage)


@dataclass(frozen=True)
class Decision:
    """One thing the configuration changes against the code as written:
    `kind` (POLICY, NAME, REST, SITE, STRUCTURE), `key` (the name, the site
    key, a split's part), `action` (for a name: RECOMPUTE, OFFLOAD or
    SAVE; `written`: what the code as written does with it), `site` (for a
    name or a rest: the site's key; None: the outer policy) and `what`, in
    words: `recomputing 'h5' (model.py:41) at site block`."""

    kind: str
    what: str
    key: str | int | None = None
    action: str | None = None
    site: SiteKey | None = None
    written: str | None = None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "what": self.what, "key": self.key, "action": self.action,
                "site": self.site}  # fmt: skip


@dataclass(frozen=True)
class SiteNames:
    """What the decisions at a site key need of the program as written: the
    checkpoint_names made in its body (name -> the line that makes it), and
    the policy written there where it decides by name alone (a names
    policy, the same at every site of the key), else None."""

    names: dict[str, str]
    written: policies.PolicySpec | None = None


@dataclass(frozen=True)
class Culprit:
    """The smallest set of decisions found that moves the gradients past the
    tolerance, the leaf it moves most (`leaf`, by `max_abs`) and the calls
    back to Python that set runs again (`callbacks`), `line`: all in one
    sentence. `verifies`: the configurations verified to find it."""

    decisions: tuple[Decision, ...]
    leaf: str
    max_abs: float
    callbacks: tuple[str, ...]
    line: str
    verifies: int

    def to_dict(self) -> dict:
        return {
            "decisions": [d.to_dict() for d in self.decisions],
            "leaf": self.leaf,
            "max_abs": json_number(self.max_abs),
            "callbacks": list(self.callbacks),
            "line": self.line,
            "verifies": self.verifies,
        }


def decisions(
    config: Config, names: dict[str, str], sites: dict[SiteKey, SiteNames] | None = None
) -> list[Decision]:
    """What `config` changes against the code as written, in its order:
    the outer policy (by name where it is a names policy), the sites (by
    name where `sites` says what each makes), the structure (a split by its
    parts). `names`: the program's checkpoint_names and where each is made
    (`model.py:41`)."""
    out: list[Decision] = []
    outer = config.spec
    named = _by_name(outer)
    if named is not None:
        out.append(Decision(REST, f"the outer policy {outer.canonical} with every name saved"))
        out += _name_decisions(named, names, None, None, "")
    elif outer.kind != policies.AS_WRITTEN:
        out.append(Decision(POLICY, f"the outer policy {outer.canonical}"))
    for key, spec in config.site_specs:
        out += _site_decisions(key, spec, (sites or {}).get(key))
    out += _structure_decisions(config)
    return out


def _site_decisions(key: SiteKey, spec: policies.PolicySpec, place: SiteNames | None) -> list:
    named = _by_name(spec)
    if named is None or place is None or not place.names:
        return [Decision(SITE, f"site {key}: {spec.canonical}", key)]
    out = []
    # The rest differs from what is written unless both decide by name alone.
    if place.written is None or named != spec:
        with_what = "its names as written" if place.written is not None else "every name saved"
        out.append(Decision(REST, f"site {key}: {spec.canonical} with {with_what}", site=key))
    return out + _name_decisions(named, place.names, place.written, key, f" at site {key}")


def _name_decisions(
    named: policies.PolicySpec,
    names: dict[str, str],
    written: policies.PolicySpec | None,
    site: SiteKey | None,
    at: str,
) -> list[Decision]:
    """One decision per name `named` treats otherwise than `written` (a names
    policy; None: every name saved)."""
    out = []
    for name, where in names.items():
        action = _action(named, name)
        was = SAVE if written is None else _action(written, name)
        if action != was:
            what = f"{ACTING[action]} {name!r} ({where}){at}"
            out.append(Decision(NAME, what, name, action, site, was))
    return out


def _structure_decisions(config: Config) -> list[Decision]:
    s = config.structure
    if s is None:
        return []
    if s.kind == SPLIT:
        first, rest = s.parts
        if first.kind != policies.AS_WRITTEN and rest.kind != policies.AS_WRITTEN:
            return [
                Decision(STRUCTURE, f"structure {s}: its first {s.count} layers under "
                         f"{first.canonical}", FIRST),
                Decision(STRUCTURE, f"structure {s}: its other layers under {rest.canonical}",
                         OTHERS),
            ]  # fmt: skip
    return [Decision(STRUCTURE, f"structure {s}")]


def configure(config: Config, found: list[Decision], chosen: list[Decision]) -> Config:
    """`config` with only the `chosen` decisions of `found` (`decisions`)
    applied, the rest as the code is written: a name not chosen is as
    written (outside any site: saved)."""
    kinds = {d.kind for d in chosen}
    outer = AS_WRITTEN
    if POLICY in kinds:
        outer = config.spec
    elif any(d.kind in (REST, NAME) and d.site is None for d in chosen):
        outer = _names_applied(config.spec, found, chosen, None)
    whole = {d.key for d in chosen if d.kind == SITE}
    by_name = {d.site for d in chosen if d.kind in (REST, NAME) and d.site is not None}
    overrides = []
    for key, spec in config.site_specs:
        if key in whole:
            overrides.append((key, spec))
        elif key in by_name:
            overrides.append((key, _names_applied(spec, found, chosen, key)))
    return Config(outer, tuple(overrides), config.device, _structure(config, chosen))


def _names_applied(
    spec: policies.PolicySpec, found: list[Decision], chosen: list[Decision], site: SiteKey | None
) -> policies.PolicySpec:
    """`spec` (a policy deciding by name) with each name whose decision is
    not chosen treated as the code as written treats it."""
    named = _by_name(spec)
    assert named is not None  # only a policy deciding by name has these decisions
    saved, offloaded = set(named.names), set(named.offloaded)
    for d in found:
        if d.kind != NAME or d.site != site or d in chosen:
            continue
        name = str(d.key)
        saved.discard(name)
        offloaded.discard(name)
        if d.written == SAVE:
            saved.add(name)
        elif d.written == OFFLOAD:
            offloaded.add(name)
    return with_names(spec, names_policy(sorted(saved), sorted(offloaded)))


def _structure(config: Config, chosen: list[Decision]) -> Structure | None:
    s = config.structure
    parts = {d.key for d in chosen if d.kind == STRUCTURE}
    if s is None or not parts:
        return None
    if parts == {None}:
        return s
    first, rest = s.parts
    return replace(
        s,
        first=first if FIRST in parts else AS_WRITTEN,
        rest=rest if OTHERS in parts else AS_WRITTEN,
    )


def minimal(
    candidates: list[Decision], differs: Callable[[list[Decision]], bool]
) -> list[Decision]:
    """The smallest set of `candidates` found that `differs` (all of them
    do, none doesn't): module doc."""
    needed: list[Decision] = []
    rest = list(candidates)
    while rest:
        lo, hi = 0, len(rest)  # needed + rest[:hi] differs; needed + rest[:lo] is not known to
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if differs(needed + rest[:mid]):
                hi = mid
            else:
                lo = mid
        needed.append(rest[hi - 1])
        rest = rest[: hi - 1]
        if not rest or differs(needed):
            break
    return needed


def _by_name(spec: policies.PolicySpec) -> policies.PolicySpec | None:
    """What the outer policy decides by name, where that is all a names
    policy decides beyond recomputing the unnamed values: a names policy,
    or one half of a save_from_both_policies."""
    if spec.kind == policies.AS_WRITTEN:
        return None
    return names_part(spec)


def _action(named: policies.PolicySpec, name: str) -> str:
    """What the names policy `named` does with `name`: SAVE, OFFLOAD or
    RECOMPUTE."""
    if name in named.offloaded:
        return OFFLOAD
    if name in named.names:
        return SAVE
    return RECOMPUTE
