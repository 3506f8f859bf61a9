"""Provides `render` and `verdict_line`: `verify`'s result
(core/xla/verify/runs.py, Contract 18) in every format: one line saying whether
the gradients are the code as written's, then the leaves that differ; and
`report_lines`, what `report --verify` adds to a report."""

from __future__ import annotations

import json
from html import escape
from typing import TYPE_CHECKING

from remat_tui.core.units import count
from remat_tui.report.tables import md_cell

if TYPE_CHECKING:
    from remat_tui.core.model import Analysis
    from remat_tui.core.xla.verify.leaves import Leaf
    from remat_tui.core.xla.verify.runs import Verification


def verdict_line(v: Verification) -> str:
    """The verdict in one line, with the configuration and the device."""
    under = f"{v.config} on {v.device}"
    n = len(v.leaves)
    if v.verdict == "not_run":
        return f"not verified: {v.reason}"
    if v.verdict == "equal":
        return (
            f"same gradients: all {count(n, 'leaf', 'leaves')} (loss and gradients) bitwise "
            f"equal to the code as written's; {under}"
        )
    if v.verdict == "agree":
        worst = max(v.leaves, key=_share)
        return (
            f"same gradients within tolerance: {v.bitwise_leaves} of {n} leaves bitwise equal "
            f"to the code as written's, the largest difference {_e(worst.max_abs)} "
            f"({worst.path}, {_share(worst):.2g} of its tolerance); {under}"
        )
    differ = v.differing
    return (
        f"gradients differ: {len(differ)} of {n} leaves past their tolerance against the code "
        f"as written's, the largest difference {_e(max(x.max_abs for x in differ))}; {under}"
    )


def brief_lines(v: Verification) -> list[str]:
    """The verdict where a few lines fit (the app, above the panes): agree,
    differ or not run; the leaves bitwise equal; the worst leaf (the most
    of its tolerance used) against its tolerance; and where the gradients
    differ, the culprit (or the calls back to Python, where none was
    sought)."""
    if v.verdict == "not_run":
        return [f"verify: not run: {v.reason}"]
    n = len(v.leaves)
    worst = max(v.leaves, key=_share)
    share = f"{v.bitwise_leaves} of {count(n, 'leaf', 'leaves')} bitwise equal"
    if v.verdict == "equal":
        head = f"verify ✓ gradients agree: {share} (loss and gradients)"
    else:
        past = "≤" if worst.within else ">"
        compared = (
            f"worst {worst.path}: max abs {_e(worst.max_abs)} {past} tolerance "
            f"{_e(worst.tolerance)}"
        )
        if v.verdict == "agree":
            head = f"verify ✓ gradients agree within tolerance: {share}; {compared}"
        else:
            differ = len(v.differing)
            head = f"verify ✗ gradients differ: {share}, {differ} past tolerance; {compared}"
    out = [f"{head} · {v.config} on {v.device}, against the code as written"]
    if v.verdict == "differ":
        if v.culprit is not None:
            out.append(f"culprit: {v.culprit.line}")
        else:
            out += [c.strip() for c in map(callback_line, v.callbacks)]
    return out


def leaf_line(leaf: Leaf) -> str:
    """`params['W1']  float32[16,16]  max abs 3.2e-02  max rel 1.1e-01  tolerance 3.6e-07`."""
    shape = ",".join(str(d) for d in leaf.shape)
    return (
        f"{leaf.path}  {leaf.dtype}[{shape}]  max abs {_e(leaf.max_abs)}  "
        f"max rel {_e(leaf.max_rel)}  tolerance {_e(leaf.tolerance)}"
    )


def lines(v: Verification) -> list[str]:
    return [
        verdict_line(v),
        *([f"  parameters: {v.parameters}"] if v.parameters else []),
        *(f"  {leaf_line(leaf)}" for leaf in v.differing),
        *(callback_line(c) for c in v.callbacks),
        *decision_lines(v),
    ]


def decision_lines(v: Verification) -> list[str]:
    """Where the gradients differ: what the configuration changes against
    the code as written (where asked: verify_bisect.py's verify_explained),
    and which of those moved them. (Where they agree, the JSON lists the
    decisions; the text keeps to its one line.)"""
    if not v.decisions or v.verdict != "differ":
        return []
    whats = "; ".join(d.what for d in v.decisions)
    out = [f"  decisions against the code as written ({len(v.decisions)}): {whats}"]
    if v.culprit is not None:
        tried = v.culprit.verifies
        found = f" ({count(tried, 'configuration')} verified to find it)" if tried else ""
        out.append(f"  culprit: {v.culprit.line}{found}")
    return out


def report_lines(a: Analysis) -> list[str]:
    """A report's verification (`report --verify`): the verdict in one line,
    then (where they differ) the leaves and the calls back to Python, as
    `verify` prints them; none where it was not asked for."""
    if a.gradients is None:
        return []
    head, *rest = lines(a.gradients)
    return [f"verify: {head}", *rest]


def callback_line(callback: str) -> str:
    """Why a call back to Python may be what moved the gradients."""
    return (
        f"  the program calls back to Python: {callback}; recomputed under a checkpoint, it "
        "runs again in the backward pass, with other values where it reads Python state"
    )


def render(v: Verification, fmt: str, target: str) -> str:
    """`v` in format `fmt`; `target` names it (`file:name`)."""
    if fmt == "json":
        out = {"schema": 1, "target": target, "config": v.config, "gradients": v.to_dict()}
        return json.dumps(out, indent=2) + "\n"
    if fmt == "text":
        return "\n".join(lines(v)) + "\n"
    head, *rest = lines(v)
    title = f"verify {target}"
    if fmt == "md":
        return f"# remat-tui {md_cell(title)}\n\n{md_cell(head)}\n\n" + "".join(
            f"- {md_cell(x.strip())}\n" for x in rest
        )
    if fmt == "html":
        items = "".join(f"<li>{escape(x.strip())}</li>" for x in rest)
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>remat-tui {escape(title)}</title></head><body>"
            f"<h1>remat-tui {escape(title)}</h1><p>{escape(head)}</p><ul>{items}</ul>"
            "</body></html>\n"
        )
    raise ValueError(f"unknown format {fmt!r}")


def _share(leaf: Leaf) -> float:
    """How much of its tolerance a leaf's difference uses."""
    if not leaf.tolerance:  # an integer leaf: held to equality
        return 0.0 if leaf.bitwise else float("inf")
    return leaf.max_abs / leaf.tolerance


def _e(x: float) -> str:
    return f"{x:.2e}"
