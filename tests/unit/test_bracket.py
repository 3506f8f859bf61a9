"""fit's search order (core/search/fit/bracket.py), pure: on peak curves of the
shapes XLA gives (linear in the batch, rounded up to tiles, bending, with a
kink), the answer is the largest batch that fits by brute force, and it takes
fewer tries than doubling then bisecting by hand."""

import math
import random

import pytest

from remat_tui.core.search.fit.bracket import Tried, bracket, next_batch

CURVES = {
    "linear": lambda a, c: lambda b: a + c * b,
    "tiled": lambda a, c: lambda b: a + c * math.ceil(b / 8) * 8,
    "bending": lambda a, c: lambda b: a + c * b + c * b * b / 200,
    "kinked": lambda a, c: lambda b: a + c * b + (3 * c * (b - 50) if b > 50 else 0),
}
CAP = 1 << 20


def search(peak, budget, multiple, start, refused_above=None):
    """The search against `peak`; a compile whose peak is above `refused_above`
    is refused, as XLA refuses what exceeds the device: no peak known."""
    tried = []
    while (b := next_batch(tried, budget, multiple, CAP, start)) is not None:
        assert b % multiple == 0 and multiple <= b <= CAP
        assert b not in {t.batch for t in tried}, "a batch tried twice"
        p = peak(b)
        refused = refused_above is not None and p > refused_above
        tried.append(Tried(b, p <= budget, None if refused else p))
    return bracket(tried)[0], len(tried)


def by_hand(peak, budget, multiple):
    """Doubling from the smallest batch, then bisecting: what a user does."""
    tries, low, high, b = 0, 0, None, multiple
    while high is None:
        tries += 1
        if peak(b) <= budget:
            low, b = b, 2 * b
        else:
            high = b
    while high - low > multiple:
        mid = max((low + high) // 2 // multiple * multiple, low + multiple)
        tries += 1
        low, high = (mid, high) if peak(mid) <= budget else (low, mid)
    return low, tries


def largest(peak, budget, multiple):
    return max((b for b in range(multiple, 20000, multiple) if peak(b) <= budget), default=0)


@pytest.mark.parametrize("device", [None, 1.0, 1.3])
@pytest.mark.parametrize("curve", sorted(CURVES))
def test_exact_and_fewer_tries_than_by_hand(curve, device):
    """`device`: every compile above the budget refused (1.0), those 30% above
    it (1.3), none (None)."""
    rng = random.Random(curve)
    ours = hand = 0
    for _ in range(150):
        a, c = rng.uniform(1e6, 1e9), rng.uniform(1e3, 1e7)
        budget = a + c * rng.uniform(1, 3000)
        multiple = rng.choice([1, 1, 2, 8])
        start = max(rng.choice([1, 8, 32, 100]) // multiple * multiple, multiple)
        peak = CURVES[curve](a, c)
        found, tries = search(peak, budget, multiple, start, device and device * budget)
        assert found == largest(peak, budget, multiple)
        ours += tries
        hand += by_hand(peak, budget, multiple)[1]
    assert ours < 0.8 * hand, (ours, hand)


def test_nothing_fits_and_the_cap():
    found, tries = search(lambda b: 100 + b, 50, 1, 32)
    assert found == 0 and tries <= 3  # 32, then straight down to 1
    tried = []
    while (b := next_batch(tried, 10**9, 4, 64, 32)) is not None:
        tried.append(Tried(b, True, b))
    assert bracket(tried) == (64, None) and [t.batch for t in tried] == [32, 64]


def test_a_linear_peak_closes_in_few_tries():
    peak = CURVES["linear"](5e8, 2e6)
    budget = peak(777) + 1
    assert search(peak, budget, 1, 32)[0] == 777
    assert search(peak, budget, 1, 32)[1] <= 5
