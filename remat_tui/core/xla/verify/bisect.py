"""Provides `verify_explained`: `verify` (`xla.verify.runs`) and, where
the gradients differ, which of the configuration's decisions moves them
(issue 43): subsets of its decisions (`xla.verify.decisions`) applied
as configurations and verified, the code as written's run kept by verify,
searched with `minimal`. Said in one line: "recomputing 'h5' (model.py:70)
changes params['W3']'s gradient by 1.8e-02: the pure_callback at model.py:36
runs again in the backward pass".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from remat_tui.core.setup.config import Config, SiteKey
from remat_tui.core.xla.verify.decisions import (
    NAME,
    REST,
    BisectProgress,
    Culprit,
    Decision,
    SiteNames,
    configure,
    decisions,
    minimal,
)
from remat_tui.core.xla.verify.program_names import program_names, site_names
from remat_tui.core.xla.verify.runs import DIFFER, NOT_RUN, SEED, Verification, verify
from remat_tui.errors import RematError
from remat_tui.registry import Target


def verify_explained(
    target: Target,
    config: Config,
    cancelled: Callable[[], bool] | None = None,
    *,
    seed: int = SEED,
    progress: BisectProgress | None = None,
) -> Verification:
    """`verify(target, config)` with its `decisions`, and where the
    gradients differ, its `culprit`: the fewest decisions found that move
    them (`xla.verify.decisions`'s `minimal`); `progress` is told of each
    configuration verified to find them."""
    result = verify(target, config, cancelled, seed=seed)
    if result.verdict == NOT_RUN:
        return result
    names, sites = program_names(target, config), site_names(target, config)
    found, culprit = explain(target, config, result, seed, names, progress, cancelled, sites)
    return replace(result, decisions=found, culprit=culprit)


def explain(
    target: Target,
    config: Config,
    verification: Verification,
    seed: int,
    names: dict[str, str],
    progress: BisectProgress | None = None,
    cancelled: Callable[[], bool] | None = None,
    sites: dict[SiteKey, SiteNames] | None = None,
) -> tuple[tuple[Decision, ...], Culprit | None]:
    """The decisions `config` makes (`names`: the program's; `sites`: what
    each overridden site makes, `xla.verify.program_names`), and where `verification`
    (its Verification) differs, the culprit (None where it agrees)."""
    found = decisions(config, names, sites)
    if verification.verdict != DIFFER or not found:
        return tuple(found), None
    seen: dict[str, Verification | None] = {config.label(): verification}
    # the verifies one needed decision takes, for the progress line
    budget = (len(found) - 1).bit_length() + 1

    def run(chosen: list[Decision]) -> Verification | None:
        trial = configure(config, found, chosen)
        label = trial.label()
        if label not in seen:
            if progress is not None:
                i = len(seen) - 1
                progress(i, max(budget, i + 1), trial.with_device(None), "verifying")
            try:
                seen[label] = verify(target, trial, cancelled, seed=seed)
            except RematError:  # a subset that does not compile or run moves nothing known
                seen[label] = None
        return seen[label]

    def differs(chosen: list[Decision]) -> bool:
        v = run(chosen)
        return v is not None and v.verdict == DIFFER

    needed = found
    if len(found) > 1:
        needed = minimal(found, differs)
        # keep the program's order, and a name's decision brings its policy's rest along unsaid
        needed = [d for d in found if d in needed]
        named = {d.site for d in needed if d.kind == NAME}
        needed = [d for d in needed if not (d.kind == REST and d.site in named)]
    alone = run(needed)
    if alone is None or alone.verdict != DIFFER:
        # Adding a decision undid a difference: no smaller set is known to differ.
        needed, alone = found, verification
    # `alone` (the culprit's own verification) names the calls back to Python
    # its recomputation runs again, not every one the program makes.
    return tuple(found), _culprit(needed, alone, verification.step, len(seen) - 1)


def _culprit(needed: list[Decision], v: Verification, step: str, verifies: int) -> Culprit:
    worst = max(v.differing or v.leaves, key=lambda leaf: leaf.max_abs)
    callbacks = v.callbacks
    what = " and ".join(d.what for d in needed)
    verb = "changes" if len(needed) == 1 else "together change"
    if worst.path == "loss":
        moved = "the loss"
    elif step == "train":
        moved = f"the new {worst.path}"
    else:
        moved = f"{worst.path}'s gradient"
    line = f"{what} {verb} {moved} by {worst.max_abs:.1e}"
    if len(callbacks) == 1:
        kind, _, where = callbacks[0].partition(" at ")
        line += f": the {kind} at {where} runs again in the backward pass"
    elif callbacks:
        line += (
            f": the program calls back to Python at {', '.join(callbacks)}; "
            "recomputed, a call runs again in the backward pass"
        )
    return Culprit(tuple(needed), worst.path, worst.max_abs, callbacks, line, verifies)
