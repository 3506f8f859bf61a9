"""Provides `checkpoints_code`: what to paste at the user's checkpoints for
a configuration's site overrides, one piece of code per line that applies
a checkpoint.

A line a loop runs (a Python loop calling `jax.checkpoint(layer)`, a list
of `nn.remat(Block)` layers, `eqx.filter_checkpoint` in a loop) applies its
checkpoint once per call, each call its own site. One policy for every call
is that line's new policy (`trace.wrappers` `site_code`). Calls given
different policies (a `--site` override at one call, the exact search's
per-call answer) need a policy chosen by the call's index, never a second
`policy=` on the same line:

    # model.py:12, jax.checkpoint(layer, ...): the 4 calls it makes (sites 1-4) ...
    def layer_policy(i):
        \"\"\"The policy of call i of layer (0 for the first).\"\"\"
        if i < 3:
            return jax.checkpoint_policies.save_only_these_names('a')
        return jax.checkpoint_policies.nothing_saveable

    # and where the loop calls it:
    jax.checkpoint(layer, policy=layer_policy(i))

Where some calls drop their checkpoint (`as_written`), the function gives
the callable itself (`layer_at(i)`). Consecutive calls with one policy are
one branch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from remat_tui.core.model import Site, Wrapper
from remat_tui.core.setup import policies
from remat_tui.core.trace import written_checkpoints
from remat_tui.core.trace.wrappers import site_code

# A call whose policy is neither overridden nor one remat-tui can write (a
# custom callable): the code names it for the user to put in.
WRITTEN = "written_policy"


def checkpoints_code(sites: Sequence[Site], plan: dict[int, policies.PolicySpec]) -> list[str]:
    """The code for every line whose checkpoint `plan` (site id -> the
    policy applied there) changes, in program order."""
    parts = []
    for group in _by_line(sites):
        if not any(s.id in plan for s in group):
            continue
        chosen = [plan.get(s.id, s.spec) for s in group]
        if len(set(chosen)) == 1 and chosen[0] is not None:
            where, note, code = site_code(group[0], chosen[0])
            parts.append(f"# {where} ({_ids(group)}){note}\n{code}")
        else:
            parts.append(_by_index(group, chosen))
    return parts


def _by_line(sites: Sequence[Site]) -> list[list[Site]]:
    """The sites grouped by the line that applies them (with the function
    they checkpoint): the calls one line makes. A site whose line is not
    known stands alone."""
    groups: dict[tuple, list[Site]] = {}
    for s in sites:
        key = (s.function, s.source.file, s.source.line) if s.source else (s.function, s.id)
        groups.setdefault(key, []).append(s)
    return list(groups.values())


def _ids(group: Sequence[Site]) -> str:
    if len(group) == 1:
        return f"site {group[0].id}"
    return f"the {len(group)} calls it makes: sites {group[0].id}-{group[-1].id}"


def _by_index(group: Sequence[Site], chosen: Sequence[policies.PolicySpec | None]) -> str:
    """A function of the call's index giving each call its policy (or, where
    some calls drop the checkpoint, its callable), and where to use it."""
    site = group[0]
    where = site.source.where() if site.source else "line not known"
    function = _identifier(site.function)
    w = site.wrapper
    # What the line checkpoints, as written (`sharded`, a shard_map of `block`).
    written = written_checkpoints.checkpointed_at(site.source) if w is None else None
    wrapped = (w.wrapped or function) if w is not None else (written or function)
    applies = f"{w.call}({wrapped}, ...)" if w is not None else f"jax.checkpoint({wrapped}, ...)"
    runs = _runs(chosen)
    head = [
        f"# {where}, {applies}: the {len(group)} calls it makes (sites {group[0].id}-"
        f"{group[-1].id}), each with its own policy (i: the call's index, 0 for the first)",
    ]
    if any(spec is None for spec in chosen):
        head.append(f"# {WRITTEN}: the policy this line passes now (remat-tui cannot write it out)")
    if not any(_unchecked(spec) for spec in chosen):
        name = f"{function}_policy"
        lines = [*head, f"def {name}(i):", f'    """The policy of call i of {function}."""']
        lines += _branches(runs, _expression)
        use = (
            f"jax.checkpoint({wrapped}, policy={name}(i){site.keywords})"
            if w is None
            else f"policy={name}(i)  # in {applies} (line {w.policy_line})"
        )
    else:
        name = f"{function}_at"
        lines = [*head, f"def {name}(i):",
                 f'    """{wrapped} as call i runs it: checkpointed, or not."""']  # fmt: skip
        lines += _branches(runs, lambda spec: _callable(spec, wrapped, w, site.keywords))
        use = f"{name}(i)  # in place of {applies}"
    return "\n".join([*lines, "", "# and where the loop calls it:", use])


def _branches(
    runs: list[tuple[int, policies.PolicySpec | None]],
    code: Callable[[policies.PolicySpec | None], str],
) -> list[str]:
    lines = []
    for end, spec in runs[:-1]:
        lines += [f"    if i < {end}:", f"        return {code(spec)}"]
    lines.append(f"    return {code(runs[-1][1])}")
    return lines


def _unchecked(spec: policies.PolicySpec | None) -> bool:
    return spec is not None and spec.kind == policies.AS_WRITTEN


def _callable(
    spec: policies.PolicySpec | None, wrapped: str, w: Wrapper | None, keywords: str
) -> str:
    """The callable one call runs: the function itself where its checkpoint
    is dropped, else the checkpoint with its policy (and, for a
    jax.checkpoint, its other `keywords` as written)."""
    if _unchecked(spec):
        return f"{wrapped}  # no checkpoint"
    if w is not None:  # a library's wrapper: its other arguments are the user's call's
        return f"{w.call}({wrapped}, policy={_expression(spec)})"
    return f"jax.checkpoint({wrapped}, policy={_expression(spec)}{keywords})"


def _runs(
    specs: Sequence[policies.PolicySpec | None],
) -> list[tuple[int, policies.PolicySpec | None]]:
    """(the index after the run, its spec) for each run of equal specs."""
    runs: list[tuple[int, policies.PolicySpec | None]] = []
    for i, spec in enumerate(specs):
        if runs and runs[-1][1] == spec:
            runs[-1] = (i + 1, spec)
        else:
            runs.append((i + 1, spec))
    return runs


def _expression(spec: policies.PolicySpec | None) -> str:
    """The policy as code, in its plainest spelling (nothing_saveable for
    save_only_these_names())."""
    if spec is None:
        return WRITTEN
    return policies.same_decisions(spec).expression()


def _identifier(function: str) -> str:
    """A Python name for the checkpointed function: `Block` for
    `Block.__call__`, `step` for `f.<locals>.step`."""
    parts = [p for p in function.split(".") if p != "<locals>"]
    name = parts[-2] if len(parts) > 1 and parts[-1] == "__call__" else (parts or [function])[-1]
    name = re.sub(r"\W", "_", name)
    return name if name.isidentifier() else f"f_{name}"
