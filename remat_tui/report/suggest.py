"""Provides the report of suggest (text, Markdown, JSON): the answer, what it
saves against the code as written, how the search went, and what the answer
is proven against (Contract 12's certificate, in words); and the line that
says how the exact search narrows, for the CLI's and the app's progress."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from remat_tui.core.search.rows import CostSource
from remat_tui.core.units import count, human_bytes, human_flops, human_seconds, told_apart
from remat_tui.report.comparisons import differentiated_legend, structure_words
from remat_tui.report.labels import config_label
from remat_tui.report.memory import peak_make_up, summary
from remat_tui.report.phrases import residual_measure

if TYPE_CHECKING:
    from remat_tui.core.search.exact.certificate import Certificate
    from remat_tui.core.search.exact.search import Narrowing
    from remat_tui.core.search.rows import Row
    from remat_tui.core.search.suggest.pipeline import Suggestion


def render_suggest(s: Suggestion, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(s.to_dict(), indent=2) + "\n"
    best, base = s.best, s.baseline
    saving = base.weighed_bytes - best.weighed_bytes
    lines = [
        suggest_headline(s),
        f"against as written: {human_bytes(saving)} less"
        if saving >= 0
        else f"against as written: {human_bytes(-saving)} more",
        search_words(s),
        *proof_lines(s),
        "",
        "paste:",
        best.python,
    ]
    if s.set_aside is not None:
        lines.insert(1, set_aside_words(s))
    step = differentiated_legend(s.rows).strip()  # where the step and the residuals differ
    if step:
        lines.insert(3, step)
    memory = best.compiled.memory if best.compiled else None
    if memory and memory["peak_bytes"]:
        lines.insert(1, f"its peak: {peak_make_up(memory)}; {summary(memory)}")
    if s.budget_above_device and s.device_memory is not None:  # known when above it
        lines.insert(
            1,
            f"the budget is above the {human_bytes(s.device_memory)} the device has for the "
            "program: the device is the real limit",
        )
    lines[3:3] = verify_lines(s)
    if best.notes:
        lines += ["", *(f"note: {n}" for n in best.notes)]
    if s.structure_notes:
        lines += ["", structure_words([], s.structure_notes).strip()]
    if fmt == "md":
        proof = proof_lines(s)
        return (
            "\n".join(
                [
                    "# remat-tui suggest",
                    "",
                    *lines[:3],
                    *[step][: bool(step)],
                    *[f"- {line.strip()}" for line in proof],
                    *[f"- {line}" for line in verify_lines(s)],
                    "",
                    "```",
                    best.python,
                    "```",
                ]
            )
            + "\n"  # fmt: skip
        )
    return "\n".join(lines) + "\n"


def verify_lines(s: Suggestion) -> list[str]:
    """With --verify: each answer dropped because its gradients differ, and
    the answer's own verdict (report/verify.py's line)."""
    if s.gradients is None:
        return []
    from remat_tui.report.verify import verdict_line

    dropped = [
        f"verify: dropped {config_label(f.row)}: its gradients differ from the code as "
        f"written's ({f.why()})"
        for f in s.verify_failed
    ]
    return [*dropped, f"verify: {verdict_line(s.gradients)}"]


def set_aside_words(s: Suggestion) -> str:
    """Why the answer is the code as written although the search found a
    configuration it estimates (or measured) cheaper."""
    w = s.set_aside
    assert w is not None
    if w.source is CostSource.ESTIMATE:
        how = (
            f"estimated {w.saving:.1%} faster, within the estimate's resolution "
            f"({w.resolution:.0%}: closer configurations are not reliably ordered); "
            "--measure times both on the device"
        )
    else:
        how = f"measured {w.saving:.1%} faster, within its runs' spread ({w.resolution:.1%})"
    return f"keep the code as written: the best found, {config_label(w.row)}, is {how}"


def search_words(s: Suggestion) -> str:
    """How suggest searched: every configuration listed, or the exact search's
    model; how many it analysed, compiled and ran, and why the rest were not
    compiled."""
    c = s.search
    if c.method == "model" and not c.decisions:  # nothing modelled (none can fit, say)
        how = f"exact search: {s.searched} of {count(c.space, 'configuration')} analysed"
    elif c.method == "model":
        checks = count(c.rounds, "compile") if s.measure == "compiled" else count(
            c.rounds, "analysis", "analyses")  # fmt: skip
        if s.cancelled and c.bound is None:
            solved = "stopped while measuring its decisions, before it was solved"
        elif c.rounds:
            solved = f"solved exactly and checked by {checks} of its answers"
        else:  # its optimum was among what it had measured: no answer of its own to check
            solved = "solved exactly, its optimum one of the assignments measured first"
        how = (
            f"exact search: the model of {count(c.decisions, c.noun)} {solved}; "
            f"{s.searched} of {c.space} configurations analysed"
        )
    else:
        how = f"exact: all {count(s.searched, 'configuration')} analysed"
    if s.measure == "compiled":
        how += f"; {s.compiled_count} compiled"
        if c.compiles < s.compiled_count:
            how += f" ({count(c.compiles, 'program')})"
        if s.measured_count:
            how += f", {s.measured_count} that fit run on the device"
        if s.skipped:
            how += f", {s.skipped} not compiled ({s.skipped_why})"
    elif s.skipped:
        how += f"; {s.skipped} left out ({s.skipped_why})"
    if s.refused:
        shown = "; ".join(f"{config_label(r)}: {r.failure}" for r in s.refused[:3])
        more = f"; and {len(s.refused) - 3} more" if len(s.refused) > 3 else ""
        how += f"; {len(s.refused)} refused by JAX ({shown}{more})"
    return how


def proof_lines(s: Suggestion) -> list[str]:
    """What the answer is proven against: the bound, the answer's cost and
    the gap, then what the search assumed."""
    c = s.search
    lines = [f"proof: {proof_words(c, s.cancelled, s.set_aside is not None)}"]
    lines += [f"  assumes: {a}" for a in c.assumptions]
    return lines


def proof_words(c: Certificate, cancelled: bool = False, set_aside: bool = False) -> str:
    """`bound 5.08 ms (the least any candidate can cost), answer 5.08 ms: gap
    0.0%, proven optimal within the model`."""
    # (a model that decided nothing: nothing could fit before it ran)
    where = "within the model" if c.method == "model" and c.decisions else "over the whole space"
    if c.bound == float("inf") and c.best is None:
        return f"nothing in the space can fit the budget (proven {where})"
    if c.best is None:
        return "nothing found fits the budget" + (" (stopped)" if cancelled else "")
    gap = c.gap
    # The proof is of the best found; where it was set aside for the code as
    # written (within the cost's resolution), it is not the answer.
    best = "the best found (set aside)" if set_aside else "answer"
    said = (
        f"bound {cost_text(c.bound, c.cost)} (the least any candidate can cost), "
        f"{best} {cost_text(c.best, c.cost)}: gap {gap:.1%}"
        if gap is not None
        else f"{best} {cost_text(c.best, c.cost)}"
    )
    if c.proven:
        return f"{said}, proven optimal {where}"
    return f"{said}, not proven" + (" (stopped: the best verified so far)" if cancelled else "")


def cost_text(value: float | None, unit: str) -> str:
    if value is None or value == float("inf"):
        return "none"
    return human_seconds(value) if unit == "seconds" else human_flops(value)


def narrowing_line(n: Narrowing) -> str:
    """The exact search as it narrows: `model of the name decisions: bound
    5.02 ms, best 5.30 ms, gap 5.3% (12 evaluated, round 3)`: the model's
    bound, over its decisions only (the answer's covers every candidate), in
    the unit its costs carry."""
    unit = n.unit
    gap = f"gap {n.gap:.1%}" if n.gap is not None else "nothing fits yet"
    best = cost_text(n.best, unit) if n.best is not None else "none"
    return (
        f"model of the {n.of}: bound {cost_text(n.bound, unit)}, best {best}, {gap} "
        f"({n.compiles} evaluated, round {n.round}; the other candidates are weighed after)"
    )


def host_words(row: Row) -> str:
    """` and sends 441.0 MiB to host`: the residual bytes a configuration
    offloads, one device's (`per device` where its residuals are sharded),
    beside the memory it is weighed by; '' when it offloads none."""
    if not row.host_bytes:
        return ""
    return f" and sends {human_bytes(row.host_bytes)}{' per device' if row.sharded else ''} to host"


def suggest_headline(s: Suggestion) -> str:
    """What fits and what it costs (measured, estimated or in FLOPs), or the
    smallest when nothing fits."""
    best = s.best
    measure = (
        "compiled peak per device"
        if s.measure == "compiled"
        else residual_measure(best.auto_sharded_devices, best.sharded)
    )
    stopped = "stopped; the best verified so far: " if s.cancelled else ""
    if not s.fits:
        budget, smallest = told_apart(s.budget, best.weighed_bytes)
        head = (
            f"{stopped}nothing fits {budget} ({measure}); the smallest is "
            f"{config_label(best)} at {smallest}{host_words(best)}"
        )
        if not best.fits:
            said = best.compiled.error if best.compiled else None
            why = best.error or f"XLA says: {said}"
            head += f" (it does not fit the device either; {why})"
        return head
    time = ""
    if best.measured and best.measured.min_seconds is not None:  # cost_source "measured"
        guess = f"; estimated ~{human_seconds(best.time.seconds)}" if best.time else ""
        time = f", {human_seconds(best.measured.min_seconds)} a step measured on the device{guess}"
    elif best.time:
        time = f", about {human_seconds(best.time.seconds)} a step on {best.time.chip} (estimated)"
    return (
        f"{stopped}fits {human_bytes(s.budget)}: {config_label(best)} uses "
        f"{human_bytes(best.weighed_bytes)} ({measure}){host_words(best)}, recomputing "
        f"{human_flops(best.recompute_flops)}{time}"
    )
