"""Provides peak_note: the one sentence, built from two compiled peaks'
make-up (Contract 7's `memory`), on why a peak moved so much less than the
residual bytes (compare, suggest, the diff, and the code as written against a
policy); and spaces_note: why one compile's memory spaces do not add up to
XLA's own peak.
"""

from __future__ import annotations

from remat_tui.core.units import human_bytes

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


def spaces_note(peak_bytes: int, backend_peak_bytes: int | None, breakdown) -> str | None:
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
