"""Provides `flop_note`: why remat-tui's FLOP count of a step (forward,
transposition and recompute: `costs.flops`) and XLA's count of the same
compiled step differ by more than 10%, on a program without loops (XLA counts
a loop's body once, so there they always differ).

remat-tui counts the jaxprs JAX traced, a transcendental as one FLOP; XLA
counts the program it compiled, transcendentals apart. So the two compared
are remat-tui's count and XLA's FLOPs plus transcendentals, and what is left
between them is what XLA changed:
- more in XLA's: its fusions compute a cheap value again inside each fusion
  that reads it, rather than storing it once;
- less in XLA's, by about the configuration's recompute: XLA merged the
  recomputation with the forward work that computes the loss (the same
  values, computed once: on that backend the policy's recompute costs
  nothing, and it saves no memory either);
- less otherwise: the compiled step differentiates fewer arguments than the
  traced vjp (the first argument or `params=`, against every argument:
  `xla.compile.differentiated`), or XLA's simplifier removed work (dead code,
  multiplications by the cotangent of ones, constants folded).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from remat_tui.core.units import human_flops

if TYPE_CHECKING:
    from remat_tui.core.xla.compile.compiled import Compiled

TOLERANCE = 0.10


def flop_note(flops: float, recompute: float, compiled: Compiled | dict) -> str | None:
    """The sentence, or None when the counts agree within 10%, the program
    loops, or XLA gave no count. `flops`: remat-tui's count of the whole step
    per device; `recompute`: the part of it that is recomputation;
    `compiled`: a Compiled or its to_dict()."""
    get: Callable[[str], Any] = (
        compiled.get if isinstance(compiled, dict) else lambda k: getattr(compiled, k)
    )
    if get("loops") or not get("flops") or flops <= 0:
        return None
    xla = get("flops") + (get("transcendentals") or 0.0)
    gap = xla - flops
    if abs(gap) <= TOLERANCE * flops:
        return None
    counts = (
        f"XLA counts {human_flops(xla)} for the compiled step (FLOPs and transcendentals), "
        f"remat-tui {human_flops(flops)} for the traced one"
    )
    if gap > 0:
        why = (
            "XLA's fusions compute cheap values again inside each fusion that reads "
            "them, rather than storing them"
        )
    elif recompute > 0 and abs(-gap - recompute) <= 0.25 * recompute:
        why = (
            "XLA merged the recomputation with the forward work that computes the loss, "
            "so on this backend it costs no time and saves no memory"
        )
    else:
        why = "XLA's simplifier removed work (dead code, constants folded, multiplications by one)"
        differentiated = get("differentiated")
        if differentiated and not differentiated["every_argument"]:
            why = (
                "the traced count has the gradients of every argument, the compiled step "
                "those of the arguments it differentiates alone; or " + why
            )
    return f"{counts}: {why}."
