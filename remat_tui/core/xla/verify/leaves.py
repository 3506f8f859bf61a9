"""Provides `compare_leaf` and `Leaf`: one output of the step (the loss, a
gradient, a new parameter) under a configuration against the code as
written's, for `verify` (`xla.verify.runs`, Contract 18).

Per leaf: whether the two are bitwise equal, the largest absolute
difference, and the largest relative one, which is that difference over
the reference leaf's largest magnitude (a norm-wise relative error: an
element-wise one is unbounded wherever the reference is near zero, which a
gradient often is).

The tolerance, per leaf, in the leaf's own units: the larger of
- FACTOR times the reference's own sensitivity: the largest difference
  between the code as written and the very same program compiled with XLA's
  backend optimisations off (`xla_backend_optimization_level` 0), run on the
  same inputs. What a configuration changes is how XLA compiles the step
  (what it fuses, in what order it adds), so the reference against another
  compile of itself says how far values move for that reason alone, on this
  device, for this model;
- ULPS units in the last place of the leaf's dtype at its largest magnitude
  (ULPS × eps × max |reference|): a floor, since the other compile may happen
  to round every value alike where a configuration's regrouped sums do not;
- the dtype's smallest normal number, so that a leaf of zeros is not held to
  exactly zero.
Integer and boolean leaves must be equal.

A NaN where the other has a number, or an infinity of another sign, is a
difference of infinity: never within the tolerance.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import jax.numpy as jnp
import numpy as np

FACTOR = 4  # times the reference's difference from itself compiled otherwise
ULPS = 16  # units in the last place, at the leaf's largest magnitude
RULE = (
    f"per leaf, the larger of {FACTOR}x the code as written's difference from itself "
    "compiled with XLA's backend optimisations off (xla_backend_optimization_level=0), "
    f"and {ULPS} units in the last place of the leaf's dtype at its largest magnitude; "
    "integer leaves exactly"
)


@dataclass(frozen=True)
class Leaf:
    """One output of the step compared: `path` names it (`loss`, or the
    parameter's pytree path, `params['W1']`); `max_rel` is `max_abs` over the
    reference's largest magnitude; `tolerance` is in the leaf's own units
    (module doc), `self_difference` the reference's difference from itself
    compiled otherwise."""

    path: str
    dtype: str
    shape: tuple[int, ...]
    bitwise: bool
    max_abs: float
    max_rel: float
    magnitude: float  # the reference's largest absolute value
    self_difference: float
    tolerance: float

    @property
    def within(self) -> bool:
        return self.bitwise or self.max_abs <= self.tolerance

    def to_dict(self) -> dict:
        out = asdict(self)
        out["shape"] = list(self.shape)
        out["within"] = self.within
        for key in ("max_abs", "max_rel", "magnitude", "self_difference", "tolerance"):
            out[key] = json_number(out[key])
        return out


def json_number(x: float) -> float | str:
    """A float JSON can carry: infinity and NaN as words."""
    return x if math.isfinite(x) else str(x)


def compare_leaf(path: str, got: np.ndarray, want: np.ndarray, again: np.ndarray) -> Leaf:
    """`got` (under the configuration) against `want` (the code as written),
    with `again` (the code as written compiled otherwise) for the tolerance."""
    got, want, again = np.asarray(got), np.asarray(want), np.asarray(again)
    dtype = want.dtype
    bitwise = got.dtype == dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
    shape = tuple(int(n) for n in want.shape)
    if got.shape != want.shape:  # not the same program's output: never within
        inf = math.inf
        return Leaf(path, str(dtype), shape, False, inf, inf, 0.0, 0.0, 0.0)
    magnitude = _largest(want)
    if not jnp.issubdtype(dtype, jnp.inexact):
        wrong = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)), initial=0))
        rel = _relative(wrong, magnitude)
        return Leaf(path, str(dtype), shape, bitwise, wrong, rel, magnitude, 0.0, 0.0)
    diff = _difference(got, want)
    self_difference = _difference(again, want)
    finfo = jnp.finfo(dtype)
    floor = max(ULPS * float(finfo.eps) * magnitude, float(finfo.tiny))
    tolerance = max(FACTOR * self_difference, floor)
    rel = _relative(diff, magnitude)
    return Leaf(path, str(dtype), shape, bitwise, diff, rel, magnitude, self_difference, tolerance)


def _difference(a: np.ndarray, b: np.ndarray) -> float:
    """The largest |a - b|, in float64 (complex: the modulus); a NaN against
    a number, or infinities that differ, count as infinity."""
    a, b = _wide(a), _wide(b)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if np.any(nan_a != nan_b):
        return math.inf
    both = ~nan_a
    a, b = a[both], b[both]
    if a.size == 0:
        return 0.0
    unequal = a != b
    if np.any(unequal & ~(np.isfinite(a) & np.isfinite(b))):
        return math.inf
    return float(np.max(np.abs(a - b)))


def _largest(x: np.ndarray) -> float:
    wide = np.abs(_wide(x)) if x.size else np.zeros(1)
    finite = wide[np.isfinite(wide)]
    return float(np.max(finite)) if finite.size else 0.0


def _wide(x: np.ndarray) -> np.ndarray:
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return x.astype(np.complex128)
    return x.astype(np.float64)


def _relative(diff: float, magnitude: float) -> float:
    if diff == 0:
        return 0.0
    return diff / magnitude if magnitude > 0 else math.inf
