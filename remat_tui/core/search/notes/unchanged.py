"""Provides notes: why a policy or site override may change nothing, said
beside the numbers (compare's notes column, the status line, the reports).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from remat_tui.core.model import Analysis
from remat_tui.core.search.configs.distinct import merge_key
from remat_tui.core.setup import policies
from remat_tui.core.units import human_bytes
from remat_tui.registry import Target

if TYPE_CHECKING:
    from remat_tui.core.places import Site
    from remat_tui.core.search.notes.reruns import Beneath
    from remat_tui.core.search.rows import Row
    from remat_tui.core.setup.config import Config, SiteKey

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
    if same and baseline is not None:  # `same` says it is
        out.insert(0, SAME + baseline.label)
    return out


SAME = "changes nothing: the same residuals and recomputation as "


def same_yet_compiled_apart(row: Row, written: Row) -> None:
    """A row noted as changing nothing (`notes_for`) whose compiled peak is
    not the code as written's: the note says both, for the traced program
    is the same but XLA scheduled it apart (a checkpoint wrapping the whole
    function, say, keeps its own temporaries)."""
    mine, theirs = row.weighed_bytes, written.weighed_bytes
    if not (row.compiled and written.compiled) or mine == theirs:
        return
    for i, note in enumerate(row.notes):
        if note.startswith(SAME):
            than = "more" if mine > theirs else "less"
            row.notes[i] = (
                f"the same residuals and recomputation as {note[len(SAME) :]}, yet compiled "
                f"it takes {human_bytes(abs(mine - theirs))} {than} at its peak: XLA "
                "schedules the program apart"
            )


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
    out += [e.words() for e in a.effects if e.reruns]  # issue 43: callbacks run again
    return out


def _specs_in_force(a: Analysis) -> list[policies.PolicySpec]:
    return [a.config.spec, *(s.effective_spec for s in a.sites if s.override is not None)]


# Saving a name that spares less than this share of the recompute is pointed out.
SPARES_LITTLE = 0.05
SAVES_NO_NAME = (policies.names_policy([], []), policies.PolicySpec("nothing_saveable"))


def saved_name_notes(
    rows: Sequence[Row], target: Target | None = None, sites: Sequence[Site] = ()
) -> None:
    """Note on each row that saves one checkpoint_name alone (outer, or at one
    place) when that spares (almost) no recompute against saving no name
    there: the name's bytes buy nothing. Rows: compare's, whose configs hold
    both (compare.candidates makes them, merging configurations that decide
    alike: `sites`, the analysis's, tells which). With the `target`, the note
    names the work beneath the name that is still re-run
    (`search.notes.reruns`)."""
    by_decisions = {merge_key(r.config, sites): r for r in reversed(rows)}
    for row in rows:
        for place, name in _single_saved_names(row.config):
            # saving no name recomputes exactly what nothing_saveable does
            others = (merge_key(_with_spec(row.config, place, s), sites) for s in SAVES_NO_NAME)
            other = next((by_decisions[k] for k in others if k in by_decisions), None)
            if other is None:
                continue
            verdict = spare_verdict(
                name,
                spared=other.recompute_flops - row.recompute_flops,
                recompute=other.recompute_flops,
                extra_bytes=row.device_bytes - other.device_bytes,
                beneath=_beneath(target, row.config, name) if target is not None else None,
            )
            if verdict is not None:
                row.notes.append(verdict)


def _beneath(target: Target, config: Config, name: str) -> Callable:
    """What the backward pass re-runs beneath `name` under `config`, traced
    when a note asks (`search.notes.reruns`)."""

    def read() -> Beneath | None:
        from remat_tui.core.search.notes.reruns import rerun_beneath
        from remat_tui.core.trace.traced import trace_config

        return rerun_beneath(trace_config(target, config), name)

    return read


def spare_verdict(name: str, spared: int, recompute: int, extra_bytes: int,
                  beneath: Callable | None = None) -> str | None:  # fmt: skip
    """Why saving `name` alone is not worth it, or None when it is: it spares
    `spared` of the `recompute` FLOPs done with no name saved, for `extra_bytes`.
    `beneath()` (name_reruns.rerun_beneath, asked only for this note) says
    which of the user's work is still re-run beneath the name."""
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
    head = f"saving {name!r} spares {amount} recompute: "
    found = beneath() if beneath is not None else None
    if found is None:
        return head + (
            "the backward pass still re-runs the work that produces it, for another "
            "value of that work it needs"
        )
    reruns = " and ".join(found.reruns)
    if found.maker_reruns:
        return head + (
            f"the backward pass still re-runs {reruns}, which makes {name!r}: it needs "
            f"{_primitive(found.maker)}'s output as computed, not the copy "
            f"checkpoint_name tagged"
        )
    maker = _primitive(found.maker)
    rerun_words = f"the backward pass still re-runs {reruns}, which {found.maker} is computed from"
    if found.derivative:
        return head + (
            f"{rerun_words}: {maker}'s derivative ({', '.join(found.derivative)}) is re-run "
            f"from it, and {name!r} holds {maker}'s output, not its input"
        )
    return head + (
        f"{rerun_words}: the backward pass needs it, and {name!r} holds {maker}'s output, "
        "not its input"
    )


def _primitive(words: str) -> str:
    return words.split(" ", 1)[0]


def _single_saved_names(config: Config) -> Iterator[tuple[SiteKey | None, str]]:
    """(place, name) for each spec in `config` that saves exactly one name:
    place None for the outer policy, else the site key."""
    for place, spec in [(None, config.spec), *config.site_specs]:
        if spec.kind == "save_only_these_names" and len(spec.names) == 1:
            yield place, spec.names[0]


def _with_spec(config: Config, place: SiteKey | None, spec: policies.PolicySpec) -> Config:
    if place is None:
        return config.with_policy(spec)
    return config.with_sites({**dict(config.site_specs), place: spec})
