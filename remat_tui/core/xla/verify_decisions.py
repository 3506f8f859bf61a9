"""Provides the decisions of a configuration, for `verify`'s explanation
(core/xla/verify_bisect.py, issue 43): `Decision`, `decisions` (what a
configuration changes against the code as written), `configure` (a subset of
them applied), `minimal` (the search for the fewest that differ) and
`Culprit`, what the search found.

The decisions are what the configuration changes against the code as
written: the outer policy, each site's policy, the structure, and, for an
outer names policy (`save_only_these_names`, `save_and_offload_only_these_names`,
or one half of a `save_from_both_policies`), each checkpoint_name it
recomputes or offloads, one decision a name. The code as written has no
outer checkpoint, so every name is saved there; the rest of a names policy
(what no name names is recomputed) is one decision more, "the policy with
every name saved", which any name's decision brings with it.

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
from dataclasses import dataclass

from remat_tui.core.setup import policies
from remat_tui.core.setup.config import AS_WRITTEN, Config
from remat_tui.core.setup.policy_spec import names_part, names_policy, with_names
from remat_tui.core.xla.verify_leaves import json_number

# Decision kinds: the outer policy whole, a name it recomputes or offloads,
# the rest of an outer names policy, a site's policy, the structure.
POLICY, NAME, REST, SITE, STRUCTURE = "policy", "name", "rest", "site", "structure"
ACTING = {"recompute": "recomputing", "offload": "offloading"}
Progress = Callable[[int, int, Config, str], None]  # (i, total, config, stage)


@dataclass(frozen=True)
class Decision:
    """One thing the configuration changes against the code as written:
    `kind` (POLICY, NAME, REST, SITE, STRUCTURE), `key` (the name, the site
    key), `action` (for a name: "recompute" or "offload") and `what`, in
    words: `recomputing 'h5' (model.py:41)`."""

    kind: str
    what: str
    key: str | int | None = None
    action: str | None = None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "what": self.what, "key": self.key, "action": self.action}


@dataclass(frozen=True)
class Culprit:
    """The smallest set of decisions found that moves the gradients past the
    tolerance, the leaf it moves most (`leaf`, by `max_abs`) and the
    program's calls back to Python, `line`: all in one sentence. `verifies`:
    the configurations verified to find it."""

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


def decisions(config: Config, names: dict[str, str]) -> list[Decision]:
    """What `config` changes against the code as written, in its order:
    the outer policy (by name where it is a names policy), the sites, the
    structure. `names`: the program's checkpoint_names and where each is
    made (`model.py:41`)."""
    out: list[Decision] = []
    outer = config.spec
    named = _by_name(outer)
    if named is not None:
        out.append(Decision(REST, f"the outer policy {outer.canonical} with every name saved"))
        for name in names:
            action = _action(named, name)
            if action is not None:
                what = f"{ACTING[action]} {name!r} ({names[name]})"
                out.append(Decision(NAME, what, name, action))
    elif outer.kind != policies.AS_WRITTEN:
        out.append(Decision(POLICY, f"the outer policy {outer.canonical}"))
    for key, spec in config.site_specs:
        out.append(Decision(SITE, f"site {key}: {spec.canonical}", key))
    if config.structure is not None:
        out.append(Decision(STRUCTURE, f"structure {config.structure}"))
    return out


def configure(config: Config, found: list[Decision], chosen: list[Decision]) -> Config:
    """`config` with only the `chosen` decisions of `found` (`decisions`)
    applied, the rest as the code is written: a name not chosen is saved."""
    kinds = {d.kind for d in chosen}
    outer = AS_WRITTEN
    if POLICY in kinds:
        outer = config.spec
    elif kinds & {REST, NAME}:
        named = _by_name(config.spec)
        assert named is not None  # only a names policy has these decisions
        offload = [str(d.key) for d in chosen if d.kind == NAME and d.action == "offload"]
        unchosen = [str(d.key) for d in found if d.kind == NAME and d not in chosen]
        outer = with_names(config.spec, names_policy([*named.names, *unchosen], offload))
    sites = {d.key for d in chosen if d.kind == SITE}
    overrides = tuple((key, spec) for key, spec in config.site_specs if key in sites)
    structure = config.structure if STRUCTURE in kinds else None
    return Config(outer, overrides, config.device, structure)


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


def _action(named: policies.PolicySpec, name: str) -> str | None:
    """What the names policy does with `name` that the code as written
    (every name saved) does not: recompute it, offload it, or nothing."""
    if name in named.offloaded:
        return "offload"
    if name in named.names:
        return None
    return "recompute"
