"""Provides `next_batch`: where fit (`search.fit.batches`) looks next for the
largest batch whose compiled step fits a budget, from the batches it has
tried. Pure arithmetic, no JAX: tests run it against any peak curve.

The answer is a bracket: a batch B that fits and B + multiple that does not
(or B the largest batch allowed; or 0 when even the smallest does not fit).
It is the largest batch that fits wherever the peak does not shrink as the
batch grows, which is how XLA's peaks behave (linear in the batch plus what
does not depend on it, rounded up to its tiles).

From the first batch (the example's), the search
- grows while every batch fits and shrinks while none does, aiming at the
  budget along the peaks' own trend: the line through the two nearest peaks
  known (through the origin while only one is), at most GROWTH times or
  1/GROWTH of the batch in one step; doubling or halving where no trend is
  known (XLA refused every compile so far, or the peak did not grow);
- once a batch fits and a larger one does not, interpolates between the two
  (false position, the line through their peaks), and bisects whenever the
  last two tries did not halve the bracket, so a peak curve that bends cannot
  slow it down to one multiple per try.

Each try is rounded down to the multiple and kept inside the bracket, so
every try narrows it. On a linear peak it closes in three or four tries
where doubling then bisecting by hand takes two per power of two.
"""

from __future__ import annotations

from dataclasses import dataclass

GROWTH = 16  # the most one step grows (or shrinks) the batch by


@dataclass(frozen=True)
class Tried:
    batch: int
    fits: bool  # XLA took it and its peak is within the budget
    # Its compiled peak; None where XLA refused it (what XLA then says it needed
    # is its own accounting, not the compiled peak a budget is weighed against).
    peak: int | None


def bracket(tried: list[Tried]) -> tuple[int, int | None]:
    """(the largest batch known to fit below the smallest known not to, 0
    when none does; the smallest batch known not to fit, None when none)."""
    failing = [t.batch for t in tried if not t.fits]
    high = min(failing, default=None)
    fitting = [t.batch for t in tried if t.fits and (high is None or t.batch < high)]
    return max(fitting, default=0), high


def largest_allowed(multiple: int, cap: int) -> int:
    return cap // multiple * multiple


def closed(tried: list[Tried], multiple: int, cap: int) -> bool:
    """Whether the bracket is as narrow as the multiple allows."""
    if not tried:
        return False
    low, high = bracket(tried)
    if high is not None:
        return high - low <= multiple
    return low + multiple > largest_allowed(multiple, cap)


def next_batch(tried: list[Tried], budget: int, multiple: int, cap: int, start: int) -> int | None:
    """The batch to try next (`start` first), or None when the bracket is closed."""
    if not tried:
        return start
    if closed(tried, multiple, cap):
        return None
    low, high = bracket(tried)
    first_open = low + multiple
    last_open = high - multiple if high is not None else largest_allowed(multiple, cap)
    guess = None if (high is not None and _stalled(tried)) else _aim(tried, low, high, budget)
    if guess is None:  # no trend to follow: double, halve or bisect
        guess = 2 * low if high is None else (low + high) / 2
    if high is None:
        guess = min(guess, GROWTH * low)
    if low == 0 and high is not None:
        guess = max(guess, high / GROWTH)
    batch = int(guess) // multiple * multiple
    return min(max(batch, first_open), last_open)


def _aim(tried: list[Tried], low: int, high: int | None, budget: int) -> float | None:
    """The batch where the peaks' trend reaches the budget, or None."""
    known = {t.batch: t.peak for t in tried if t.peak is not None and t.peak > 0}
    below = sorted((b, p) for b, p in known.items() if b <= low)[-2:]  # the two largest that fit
    if low and high is not None:
        if low in known and high in known:
            points = [(low, known[low]), (high, known[high])]
        elif len(below) == 2:  # the larger end's peak unknown: the trend below it
            points = below
        else:
            return None
    elif high is None:  # everything tried fits
        points = below
    else:  # nothing tried fits: the two smallest
        points = sorted((b, p) for b, p in known.items() if b >= high)[:2]
    if not points:
        return None
    if len(points) == 1:
        points.insert(0, (0, 0))
    (b1, p1), (b2, p2) = points
    if b2 == b1 or p2 <= p1:
        return None
    return b1 + (budget - p1) * (b2 - b1) / (p2 - p1)


def _stalled(tried: list[Tried]) -> bool:
    """Whether the last two tries left the bracket wider than half what it was."""
    if len(tried) < 3:
        return False
    before_low, before_high = bracket(tried[:-2])
    low, high = bracket(tried)
    if before_high is None or high is None:
        return False
    return (high - low) * 2 > before_high - before_low
