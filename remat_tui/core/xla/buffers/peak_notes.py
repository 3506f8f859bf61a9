"""Provides peak_note: the one sentence, built from two compiled peaks'
make-up (Contract 7's `memory`), on why a peak moved so much less than the
residual bytes (compare, suggest, the diff, and the code as written against a
policy); kept_by_xla: what the `residual` bytes at a peak are when autodiff
saves fewer (XLA keeps forward values the jaxpr recomputes); recomputed_early:
what the `recomputed` bytes at a peak are when XLA computed them in the
forward part; and spaces_note: why one compile's memory spaces do not add up to XLA's own peak.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from remat_tui.core.units import human_bytes

if TYPE_CHECKING:
    from remat_tui.core.xla.buffers.accounting import Memory

# "Why did the peak not move": said when the residual bytes move by more than
# this share and the compiled peak by less than a third of their move.
RESIDUALS_MOVED = 0.20
TEMPORARY_DOMINATES = 0.5  # temporaries this share of the peak: no policy reduces them
FIXED_DOMINATES = 0.5  # arguments and outputs this share of the peak: said
SAME_WORK = 0.01  # XLA's FLOPs of two programs this close: the same work


def peak_note(
    before: dict | None,
    after: dict | None,
    residuals_before: int,
    residuals_after: int,
    versus: str,
    flops: tuple[float | None, float | None] | None = None,
) -> str | None:
    """One sentence, from the compiled peaks' make-up (Contract 7's
    `memory`), on why the peak moved so much less than the residual bytes
    between `versus` (before) and this configuration (after); None when it
    moved in step, or a breakdown is missing. `flops`: XLA's FLOPs of the two
    compiled programs (before, after), where known: the same work says XLA
    merged the policy's recomputation away."""
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
    why = _what_changed(before, after) or _why_the_same(after, versus, flops)
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


def _why_the_same(
    after: dict, versus: str, flops: tuple[float | None, float | None] | None
) -> list[str]:
    """Why the peak held when no category at it fell for another to rise,
    from what the data shows: XLA's program doing `versus`'s work (the
    recomputation merged into the forward work, whose values it keeps), a
    peak in the forward part, and the arguments and outputs no policy moves."""
    why = []
    before_flops, after_flops = flops or (None, None)
    if before_flops and after_flops and abs(after_flops - before_flops) <= SAME_WORK * before_flops:
        why.append(
            f"XLA's program does the work of {versus}'s (its FLOPs within {SAME_WORK:.0%}): "
            "it merged the recomputation the policy asks for into the forward work that "
            "computes the loss, and keeps those values for the backward part"
        )
    backward, step = after.get("backward_from"), after.get("peak_step")
    if backward is not None and step is not None and step < backward:
        category = max(after["by_category"], key=lambda c: after["by_category"][c])
        share = after["by_category"][category] / after["peak_bytes"]
        why.append(
            f"the peak is in the forward part (step {step}; the backward part starts at "
            f"step {backward}), where {category} holds {share:.0%} of it"
        )
    fixed = after["by_category"].get("argument", 0) + after["by_category"].get("output", 0)
    if fixed >= FIXED_DOMINATES * after["peak_bytes"]:
        why.append(
            f"arguments and outputs, which no remat policy changes, are "
            f"{fixed / after['peak_bytes']:.0%} of the peak"
        )
    return why


def kept_by_xla(memory: dict, saved_bytes: int) -> str | None:
    """What the `residual` bytes at the peak are when they are more than
    autodiff saves (`saved_bytes`: its residuals' bytes per device, the
    arguments aside; none under nothing_saveable): forward values XLA keeps
    for the backward part that the jaxpr recomputes instead. None otherwise."""
    count, kept = _at_peak(memory, "residual")
    if not kept or kept <= saved_bytes:
        return None
    saves = human_bytes(saved_bytes) if saved_bytes else "none"
    buffers = f"{count} buffer{'s' if count != 1 else ''}, {human_bytes(kept)}"
    return (
        f"The residual at the peak ({buffers}) holds forward values XLA keeps for the "
        f"backward part, where autodiff saves {saves} besides the arguments: values the "
        "jaxpr computes again in the backward part (or XLA made itself), which XLA computes "
        "once, in the forward part."
    )


def recomputed_early(memory: dict) -> str | None:
    """What the `recomputed` bytes at the peak are when XLA computed some of
    them before the backward part started (XLA on CPU schedules a
    checkpoint's recomputation as soon as its inputs exist, beside the
    forward work it repeats): values held from the forward part into the
    backward part, as residuals are. None otherwise."""
    b = memory.get("backward_from")
    recomputed = [x for x in memory["at_peak"] if x["category"] == "recomputed"]
    early = [x for x in recomputed if b is not None and x["live"][0] < b]
    if not early:
        return None
    size, total = sum(x["bytes"] for x in early), sum(x["bytes"] for x in recomputed)
    return (
        f"{human_bytes(size)} of the {human_bytes(total)} recomputed at the peak "
        f"({len(early)} buffer{'s' if len(early) != 1 else ''}) XLA computed before the "
        f"backward part (step {b}): it ran the checkpoints' recomputation beside the forward "
        "work it repeats, and holds those values into the backward part as it would "
        "residuals."
    )


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


def spaces_note(peak_bytes: int, backend_peak_bytes: int | None, breakdown: Memory) -> str | None:
    """Why the main memory's peak and the other spaces' peaks do not add up
    to the backend's own peak within 1%, when they do not."""
    backend = backend_peak_bytes
    others = breakdown.other_spaces
    if not backend or not others:
        return None
    total = peak_bytes + sum(s.peak_bytes for s in others)
    if abs(total - backend) <= 0.01 * backend:
        return None
    spaces = " + ".join(
        [f"{human_bytes(peak_bytes)} of device memory"]
        + [f"{human_bytes(s.peak_bytes)} of {s.space}" for s in others]
    )
    reserved = peak_bytes + sum(s.allocated_bytes for s in others)
    if abs(reserved - backend) <= 0.01 * backend:
        why = (
            "XLA counts the other spaces' whole allocations, remat-tui the bytes live "
            "at their peaks"
        )
    else:
        why = (
            "XLA's figure is its own accounting of the spaces at one moment, "
            "remat-tui's each space at its own peak"
        )
    return (
        f"{spaces} = {human_bytes(total)}, where XLA's peak_memory_in_bytes says "
        f"{human_bytes(backend)}: {why}."
    )
