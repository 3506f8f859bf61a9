"""Provides `per_call_code`: the code to paste for a configuration that gives
the calls of one checkpointed function different policies (the exact
search's per-call choices, core/search/exact_space.py), as a function of the
call's index that the user's loop calls:

    # model.py:12, jax.checkpoint(block, ...): the 8 calls of block (sites 1-8)
    def block_policy(i):
        \"\"\"The policy of call i of block (0 for the first).\"\"\"
        if i < 3:
            return jax.checkpoint_policies.save_only_these_names('a')
        return jax.checkpoint_policies.nothing_saveable

    # and where the loop calls it:
    jax.checkpoint(block, policy=block_policy(i))(...)

Consecutive calls with one policy are one branch. Functions whose calls
share one policy keep the analysis's own snippet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.core.trace.wrappers import site_code

if TYPE_CHECKING:
    from remat_tui.core.places import Site


def per_call_code(target_name: str, config: Config, sites: Sequence[Site]) -> str | None:
    """The code to paste for `config` where it gives the calls of a function
    different policies (by site id), or None where it does not: a function
    of the call's index for each such function; for the other sites it
    overrides, the analysis's own lines (core/trace/wrappers.py); the outer
    policy last. `sites`: the analysis's Sites."""
    overrides = dict(config.site_specs)
    parts, per_call = [], False
    for function in dict.fromkeys(s.function for s in sites):
        mine = [s for s in sites if s.function == function]
        specs = [overrides.get(s.id, overrides.get(function)) for s in mine]
        given = [spec for spec in specs if spec is not None]
        differ = len(mine) > 1 and len(given) == len(specs) and len(set(given)) > 1
        if differ and all(s.wrapper is None for s in mine):
            parts.append(_function_code(function, mine, given))
            per_call = True
        elif specs[0] is not None and len(set(specs)) == 1:
            where, note, code = site_code(mine[0], specs[0])
            parts.append(f"# {where} (site {mine[0].id}){note}\n{code}")
    if not per_call:
        return None
    if config.spec.kind != policies.AS_WRITTEN:
        parts.append(f"# around {target_name}\n{config.spec.python(target_name)}")
    return "\n\n".join(parts)


def _function_code(
    function: str, sites: Sequence[Site], specs: Sequence[policies.PolicySpec]
) -> str:
    where = sites[0].source.where() if sites[0].source else "line not known"
    ids = f"sites {sites[0].id}-{sites[-1].id}"
    name = f"{function}_policy"
    lines = [
        f"# {where}, jax.checkpoint({function}, ...): the {len(sites)} calls of {function} "
        f"({ids}), each with its own policy",
        f"def {name}(i):",
        f'    """The policy of call i of {function} (0 for the first)."""',
    ]
    runs = _runs(specs)
    for end, spec in runs[:-1]:
        lines += [f"    if i < {end}:", f"        return {_expression(spec)}"]
    lines.append(f"    return {_expression(runs[-1][1])}")
    lines += ["", "# and where the loop calls it:", f"jax.checkpoint({function}, policy={name}(i))"]
    return "\n".join(lines)


def _runs(specs: Sequence[policies.PolicySpec]) -> list[tuple[int, policies.PolicySpec]]:
    """(the index after the run, its spec) for each run of equal specs."""
    runs: list[tuple[int, policies.PolicySpec]] = []
    for i, spec in enumerate(specs):
        if runs and runs[-1][1] == spec:
            runs[-1] = (i + 1, spec)
        else:
            runs.append((i + 1, spec))
    return runs


def _expression(spec: policies.PolicySpec) -> str:
    """The policy as code, in its plainest spelling (nothing_saveable for
    save_only_these_names())."""
    return policies.same_decisions(spec).expression()
