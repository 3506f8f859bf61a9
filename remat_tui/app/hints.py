"""Provides help for typing policy specs: whole specs that complete a partial
one like `save_on`, filled in with the function's own checkpoint_names.

The core's parser says what is wrong, and "did you mean" for a misspelt
policy or keyword (`policies.did_you_mean`, the CLI's too); this module only
proposes completions, each a spec that parses.
"""

from __future__ import annotations

from collections.abc import Iterable

from remat_tui.core.setup import policies
from remat_tui.errors import RematError


def policy_names(declared: Iterable[str] = ()) -> list[str]:
    """Every word that can start a spec."""
    return [policies.AS_WRITTEN, *policies.SIMPLE, *policies.CALLABLE_FACTORIES, *declared]


def completions(
    query: str, names: Iterable[str], declared: dict | None = None
) -> list[policies.PolicySpec]:
    """Whole specs for a partial one (`save_on`, `offload`, `dots`): every policy
    whose name contains the typed word, with the function's checkpoint_names
    filled in where the policy takes names."""
    word = query.strip().split("(")[0].strip().removeprefix("jax.checkpoint_policies.")
    if len(word) < 2 or not word.isidentifier():
        return []
    names = list(names)
    out: list[str] = []
    for name in policy_names(declared or {}):
        if word.lower() not in name.lower():
            continue
        if name in policies.NAME_LISTS:
            out += [f"{name}({n!r})" for n in names]
            if len(names) > 1:
                out.append(f"{name}({', '.join(map(repr, names))})")
        elif name == policies.OFFLOAD_NAMES:
            out += [
                f"{name}(names_which_can_be_saved=[], names_which_can_be_offloaded=[{n!r}])"
                for n in names
            ]
        elif name == policies.OFFLOAD_DOTS:
            out.append(f"{name}('device', 'pinned_host')")
        elif name == policies.BOTH:
            out += [f"{name}(dots_saveable, save_only_these_names({n!r}))" for n in names]
        else:
            out.append(name)
    specs: dict[str, policies.PolicySpec] = {}
    for text in out:
        try:
            spec = policies.parse(text, declared)
        except RematError:
            continue
        specs.setdefault(spec.canonical, spec)
    return list(specs.values())
