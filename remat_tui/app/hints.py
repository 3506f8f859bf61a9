"""Provides help for typing policy specs: "did you mean" for a misspelt policy
or keyword (difflib), and whole specs that complete a partial one like
`save_on`, filled in with the function's own checkpoint_names.

The core's parser says what is wrong; this module only proposes what was
probably meant, so a proposal is always a spec that parses.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterable

from remat_tui.core.setup import policies
from remat_tui.errors import RematError

OFFLOAD_KEYWORDS = (
    "names_which_can_be_saved",
    "names_which_can_be_offloaded",
    "offload_src",
    "offload_dst",
)


def policy_names(declared: Iterable[str] = ()) -> list[str]:
    """Every word that can start a spec."""
    return [policies.AS_WRITTEN, *policies.SIMPLE, *policies.CALLABLE_FACTORIES, *declared]


def did_you_mean(text: str, declared: dict | None = None) -> policies.PolicySpec | None:
    """`text` with each unknown policy name or keyword replaced by the closest
    known one, if that gives a spec that parses; else None."""
    source = text.strip()
    for prefix in ("jax.checkpoint_policies.", "checkpoint_policies."):
        source = source.removeprefix(prefix)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError:
        return None
    known = policy_names(declared or {})
    edits = []  # (start, end, replacement) within `source`
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in known:
            candidates = known
        elif isinstance(node, ast.keyword) and node.arg and node.arg not in OFFLOAD_KEYWORDS:
            candidates = list(OFFLOAD_KEYWORDS)
        else:
            continue
        word = node.id if isinstance(node, ast.Name) else node.arg
        close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
        if close and node.lineno == 1:
            edits.append((node.col_offset, node.col_offset + len(word), close[0]))
    if not edits:
        return None
    for start, end, word in sorted(edits, reverse=True):
        source = source[:start] + word + source[end:]
    try:
        return policies.parse(source, declared)
    except RematError:
        return None


def with_suggestion(message: str, text: str, declared: dict | None = None) -> str:
    """A parse error's message, ending in "Did you mean ...?" when one is likely."""
    if "did you mean" in message.lower():  # the parser already suggests one
        return message
    meant = did_you_mean(text, declared)
    return f"{message} Did you mean {meant.canonical}?" if meant else message


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
