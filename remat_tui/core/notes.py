"""Provides notes: why a policy or site override may change nothing, said
beside the numbers (compare's notes column, the status line, the reports).
"""

from __future__ import annotations

from dataclasses import dataclass

from remat_tui.core import jaxcompat as jc
from remat_tui.core import policies
from remat_tui.core.model import Analysis
from remat_tui.core.units import human_bytes

_DOT_POLICIES = ("dots_with_no_batch_dims_saveable", policies.OFFLOAD_DOTS)


@dataclass(frozen=True)
class Baseline:
    """The configuration others are measured against: the code as written
    (with the comparison's own site overrides, if any)."""

    label: str
    residuals: tuple[str, ...]
    recompute_flops: int

    @classmethod
    def of(cls, a: Analysis) -> Baseline:
        # The device is the same for every row: naming it in a sentence is noise.
        label = a.config.with_device(None).label()
        return cls(label, tuple(r.text for r in a.residuals), a.flops["recompute"])


def notes_for(a: Analysis, baseline: Baseline | None = None) -> list[str]:
    """What the user should know about this configuration's numbers."""
    out = list(intrinsic_notes(a))
    same = (
        baseline is not None
        and a.config.with_device(None).label() != baseline.label
        and tuple(r.text for r in a.residuals) == baseline.residuals
        and a.flops["recompute"] == baseline.recompute_flops
    )
    if same:
        out.insert(0, f"changes nothing: the same residuals and recomputation as {baseline.label}")
    return out


def intrinsic_notes(a: Analysis) -> list[str]:
    """Notes one analysis can make about itself, without a baseline."""
    specs = _specs_in_force(a)
    out = []
    total, unbatched = a.dots
    for spec in specs:
        if total and not unbatched and any(spec.uses(kind) for kind in _DOT_POLICIES):
            out.append(
                f"{spec.canonical} saves no dot here: every one of the {total} dot_generals "
                "has batch dimensions, and this policy saves only dots without them"
            )
            break
    offloaded = set().union(*(s.offloaded_names() for s in specs)) if specs else set()
    if offloaded and not a.totals.host_bytes:
        names = ", ".join(map(repr, sorted(offloaded)))
        out.append(
            f"offloads nothing: no value named {names} is saved for the backward pass "
            "under this configuration, so nothing moves to host memory"
        )
    for site in a.sites:
        if site.override is not None and site.override == site.policy:
            out.append(f"site {site.id} ({site.function}) already has {site.policy} in the code")
    return out


def _specs_in_force(a: Analysis) -> list[policies.PolicySpec]:
    texts = [a.config.policy, *(s.override for s in a.sites if s.override is not None)]
    out = []
    for text in texts:
        try:
            out.append(policies.parse(text, policies.AnyName()))
        except Exception:  # a declared policy of the target: nothing to say about it
            continue
    return out


def count_dots(jaxpr) -> tuple[int, int]:
    """(dot_general equations, those without batch dimensions), bodies included:
    what tells whether a dots-without-batch-dims policy can save anything."""
    total = unbatched = 0
    for eqn, _ in jc.nested_eqns(jaxpr):
        batch = jc.primitives.dot_batch_dims(eqn)
        if batch is not None:
            total += 1
            unbatched += not batch[0] and not batch[1]
    return total, unbatched


# Saving a name that spares less than this share of the recompute is pointed out.
SPARES_LITTLE = 0.05
SAVES_NO_NAME = ("save_only_these_names()", "nothing_saveable")


def saved_name_notes(rows) -> None:
    """Note on each row that saves one checkpoint_name alone (outer, or at one
    place) when that spares (almost) no recompute against saving no name
    there: the name's bytes buy nothing. Rows: compare's, whose configs hold
    both (compare.candidates makes them)."""
    by_config = {r.config: r for r in rows}
    for row in rows:
        for place, name in _single_saved_names(row.config):
            # saving no name recomputes exactly what nothing_saveable does
            others = (_with_spec(row.config, place, s) for s in SAVES_NO_NAME)
            other = next((by_config[c] for c in others if c in by_config), None)
            if other is None:
                continue
            verdict = spare_verdict(
                name,
                spared=other.recompute_flops - row.recompute_flops,
                recompute=other.recompute_flops,
                extra_bytes=row.device_bytes - other.device_bytes,
            )
            if verdict is not None:
                row.notes.append(verdict)


def spare_verdict(name: str, spared: int, recompute: int, extra_bytes: int) -> str | None:
    """Why saving `name` alone is not worth it, or None when it is: it spares
    `spared` of the `recompute` FLOPs done with no name saved, for `extra_bytes`."""
    if spared > SPARES_LITTLE * recompute:
        return None
    if extra_bytes <= 0 and spared <= 0:
        return (
            f"saving {name!r} keeps nothing: the backward pass never reads it, "
            "so it is not a residual whatever the policy"
        )
    if extra_bytes <= 0:
        return None
    share = spared / recompute if recompute else 0.0
    if spared <= 0:
        amount = "no"
    elif share < 0.001:
        amount = "almost no (under 0.1% of the)"
    else:
        amount = f"{share:.1%} of the"
    return (
        f"saving {name!r} spares {amount} recompute: the backward pass still re-runs "
        "the work that produces it, for another value of that work it needs (GELU's "
        "derivative reads its input; tanh's reads its output as it was before "
        "checkpoint_name tagged a copy)"
    )


def _single_saved_names(config):
    """(place, name) for each spec in `config` that saves exactly one name:
    place None for the outer policy, else the site key."""
    for place, text in [(None, config.policy), *config.sites]:
        try:
            spec = policies.parse(text, policies.AnyName())
        except Exception:  # a declared policy of the target: opaque
            continue
        if spec.kind == "save_only_these_names" and len(spec.names) == 1:
            yield place, spec.names[0]


def _with_spec(config, place, spec: str):
    if place is None:
        return config.with_policy(spec)
    return config.with_sites({**dict(config.sites), place: spec})


# "Why did the peak not move": said when the residual bytes move by more than
# this share and the compiled peak by less than a third of their move.
RESIDUALS_MOVED = 0.20
TEMPORARY_DOMINATES = 0.5  # temporaries this share of the peak: no policy reduces them


def peak_note(
    before: dict, after: dict, residuals_before: int, residuals_after: int, versus: str
) -> str | None:
    """One sentence, from the compiled peaks' make-up (Contract 7's
    `memory`), on why the peak moved so much less than the residual bytes
    between `versus` (before) and this configuration (after); None when it
    moved in step, or a breakdown is missing."""
    if not before or not after or not residuals_before:
        return None
    moved = abs(residuals_after - residuals_before) / residuals_before
    peak_before, peak_after = before["peak_bytes"], after["peak_bytes"]
    if moved <= RESIDUALS_MOVED or not peak_before:
        return None
    peak_moved = abs(peak_after - peak_before) / peak_before
    if peak_moved >= moved / 3:
        return None
    change = (
        "unchanged"
        if peak_after == peak_before
        else (f"{'+' if peak_after > peak_before else '-'}{peak_moved:.0%}")
    )
    head = (
        f"peak {change} against {versus} while the residual bytes moved "
        f"{'+' if residuals_after > residuals_before else '-'}{moved:.0%}"
    )
    why = _what_changed(before, after)
    temporary = after["by_category"].get("temporary", 0)
    if temporary >= TEMPORARY_DOMINATES * peak_after:
        where = _largest_temporary(after)
        why.append(
            f"temporaries{where} are {temporary / peak_after:.0%} of the peak; "
            "no remat policy reduces them"
        )
    return head + (": " + "; ".join(why) if why else "")


def _what_changed(before: dict, after: dict) -> list[str]:
    """`7 residual buffers (56.0 MiB) became 7 recomputed buffers (56.0 MiB)
    live at once`: the categories at the peak that fell, and those that rose."""
    fell, rose = [], []
    for category in ("residual", "recomputed", "temporary", "output"):
        a = _at_peak(before, category)
        b = _at_peak(after, category)
        if b[1] < a[1]:
            fell.append((category, a))
        elif b[1] > a[1]:
            rose.append((category, b))
    if not fell or not rose:
        return []
    said = " and ".join(_buffers(c, n, size) for c, (n, size) in fell)
    became = " and ".join(_buffers(c, n, size) for c, (n, size) in rose)
    return [f"{said} at the peak became {became}, live at once"]


def _at_peak(memory: dict, category: str) -> tuple[int, int]:
    """(buffers, bytes) of `category` live at the peak."""
    held = [b["bytes"] for b in memory["at_peak"] if b["category"] == category]
    return len(held), sum(held)


def _buffers(category: str, count: int, size: int) -> str:
    return f"{count} {category} buffer{'s' if count != 1 else ''} ({human_bytes(size)})"


def _largest_temporary(memory: dict) -> str:
    """` of line 48 (attention)`: where the largest temporary at the peak was made."""
    temps = [b for b in memory["at_peak"] if b["category"] == "temporary" and b["source"]]
    if not temps:
        return ""
    source = max(temps, key=lambda b: b["bytes"])["source"]
    function = f" ({source['function']})" if source.get("function") else ""
    return f" (the largest made at {source['file'].rsplit('/', 1)[-1]}:{source['line']}{function})"
