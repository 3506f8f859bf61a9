"""Provides FoundScan: a scan of the primal program, and what a structure
may do with it (`trace.rebuilt_scans` finds them; `trace.structure_code`
writes the code for one, so it names the type without importing the finder)."""

from __future__ import annotations

from dataclasses import dataclass

from remat_tui.core.model import Source
from remat_tui.core.setup import policies
from remat_tui.core.setup.structure_specs import NESTED, Structure


@dataclass(frozen=True)
class FoundScan:
    """A scan of the primal program, and what a structure may do with it."""

    id: int  # in program order, from 1 (Structure.scan)
    steps: tuple  # from the top jaxpr down to the jaxpr holding it (sites.Step)
    index: int  # its equation's index there
    length: int  # N: the layers it runs
    function: str  # the step function it scans
    source: Source | None  # the user's line that calls the scan
    checkpointed: bool  # its body applies a jax.checkpoint (a site) at its top level
    checkpoint_function: str | None  # the function that checkpoint checkpoints
    checkpoint_policy: str | None  # that checkpoint's policy as written (canonical or custom:)
    checkpoint_spec: policies.PolicySpec | None  # the same parsed; None for a custom policy
    library: str | None  # "flax.linen" | "flax.nnx" when a Flax transform made the scan
    why_not: str | None  # why no structure is offered for it; None: offered
    prevent_cse: bool = True  # its checkpoint's prevent_cse: a rebuilt checkpoint keeps it
    # The shard_map bodies holding it, outermost first (jaxcompat ManualBody):
    # it runs once on each device, on local arrays, and is rebuilt within them.
    within: tuple = ()

    def groups(self) -> list[int]:
        """The G worth trying for nested(G): divisors of N that leave at least
        two layers a group, near sqrt(N) (the one that keeps the fewest
        carries, G + N/G, and its neighbours) and 2."""
        divisors = [g for g in range(2, self.length // 2 + 1) if self.length % g == 0]
        if not divisors:
            return []
        best = sqrt_groups(self.length)
        assert best is not None  # N has divisors
        at = divisors.index(best)
        return sorted({divisors[0], *divisors[max(at - 1, 0) : at + 2]})

    def why_not_structure(self, structure: Structure) -> str | None:
        """Why `structure` cannot be built on this scan; None when it can."""
        if self.why_not:
            return self.why_not
        n, k = self.length, structure.count
        if structure.kind == NESTED:
            if not 1 < k < n or n % k:
                return (
                    f"nested({k}): the {n} layers of scan {self.id} do not make {k} equal "
                    f"groups; G must divide {n} and be between 2 and {n // 2}"
                    + (f", e.g. nested({sqrt_groups(n)})" if sqrt_groups(n) else "")
                )
        elif not 0 < k < n:
            return f"split({k}, ...): K must be between 1 and {n - 1} for {n} layers"
        return None


def sqrt_groups(length: int) -> int | None:
    """The G of nested(G) that keeps the fewest carries (G + N/G) for N =
    `length` layers, the smaller on a tie; None when N has no divisor."""
    divisors = [g for g in range(2, length // 2 + 1) if length % g == 0]
    return min(divisors, key=lambda g: (g + length // g, g)) if divisors else None
