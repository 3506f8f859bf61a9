"""Provides `Certificate`: what suggest's answer is proven against (Contract
12's `search`), and the words for what its search assumed.

- `method`: "enumeration" (every configuration of a small space analysed,
  compiled from the least cost it could have up: nothing assumed) or
  "model" (the exact search's model of the name decisions solved exactly
  and corrected by compiling, `search.exact.search`, beside the other
  candidates compiled from their least cost up).
- `bound`: the least cost any configuration of the space can have within
  the budget, as proven (enumeration) or as the model says (model), in the
  cost's unit: seconds (`bound_seconds`) for an estimated or measured step
  time, else recompute FLOPs.
- `gap`: (the answer's cost - bound) / the answer's cost: 0 when the answer
  is proven optimal within the model; above 0 when the search was stopped
  (cancelled, or out of rounds) before it could prove it.
- `compiles`: the programs the search compiled (configurations that lower
  to one program count once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from remat_tui.core.search.exact.search import gap
from remat_tui.core.search.exact.space import POLICY_DECISIONS_AT_MOST
from remat_tui.core.search.rows import CostSource
from remat_tui.core.units import count

if TYPE_CHECKING:
    from remat_tui.core.search.exact.search import NameOutcome
    from remat_tui.core.search.exact.space import Space

ENUMERATION, MODEL = "enumeration", "model"


class Searched(Protocol):
    """What suggest's search found, as the certificate reads it (suggest's
    `Found`)."""

    @property
    def method(self) -> str:
        """ENUMERATION (the space listed whole) or MODEL (the exact search
        beside the candidates listed)."""
        ...

    @property
    def names(self) -> NameOutcome | None:
        """The exact search's outcome, where it ran."""
        ...

    @property
    def left_bound(self) -> float | None:
        """The least cost the listed candidates left uncompiled can have
        (None: none left)."""
        ...

    @property
    def stopped(self) -> bool: ...

    @property
    def covered(self) -> int:
        """Splits left uncompiled as saving at least what did not fit."""
        ...

    @property
    def compiles(self) -> int: ...

    @property
    def floor(self) -> str:
        """Why no configuration can fit, where what every one holds is above
        the budget ('' otherwise)."""
        ...

    @property
    def compiling(self) -> bool: ...

    @property
    def candidates(self) -> int:
        """The candidates listed besides the exact search's space (all of
        them, listing the space whole)."""
        ...


@dataclass(frozen=True)
class Certificate:
    """What suggest's answer is proven against (the module doc)."""

    method: str
    cost: str  # "seconds" (estimated or measured step time) or "flops" (recompute FLOPs)
    bound: float | None  # the least cost within the budget (inf: nothing can fit)
    best: float | None  # the answer's cost, where it fits
    compiles: int
    proven: bool
    assumptions: tuple[str, ...]
    space: int  # configurations in the space
    decisions: int = 0  # name decisions modelled (model)
    rounds: int = 0  # the model's answers compiled to correct it (model)
    interactions: int = 0  # sets of decisions whose interaction a compile showed (model)
    noun: str = "name decision"  # what a decision is (model): a name's state, or a policy

    @property
    def gap(self) -> float | None:
        """How far the answer may be from the optimum, as a share of its cost."""
        return gap(self.best, self.bound)

    @classmethod
    def of(
        cls, found: Searched, space: Space, best_cost: float | None, unit: str, cost_words: str
    ) -> Certificate:
        """What the answer (its cost `best_cost` where it fits; `unit` and
        `cost_words` say what the cost is) is proven against, from what the
        search `found` over `space`: the least cost anything not evaluated
        can have, the model's bound over its decisions where the exact search
        ran; proven where nothing stopped it short."""
        names = found.names
        if found.floor and best_cost is None:  # proven by one compile: nothing can fit
            floor = (found.floor, cost_words)
            return cls(found.method, unit, float("inf"), None, found.compiles, True, floor,
                       space=found.candidates, noun=space.noun)  # fmt: skip
        bounds = [b for b in (best_cost, found.left_bound) if b is not None]
        covered = [covered_words(found.covered)] if found.covered else []
        if found.method == ENUMERATION:
            # every configuration analysed: what was not compiled is bounded
            assumptions = enumeration_assumptions(found.compiling, cost_words, found.stopped)
            return cls(
                ENUMERATION, unit, min(bounds, default=None if found.stopped else float("inf")),
                best_cost, found.compiles, not found.stopped,
                (*assumptions, *covered, *shared_calls_words(space)), space=found.candidates,
            )  # fmt: skip
        # The model's bound covers its decisions only once it has solved.
        bound = None
        if names is not None and names.bound is not None:
            bound = min([*bounds, names.bound])
        said = (
            model_assumptions(names, space, found.compiling, cost_words) if names else [cost_words]
        )
        return cls(
            MODEL, unit, bound, best_cost, found.compiles,
            names is not None and names.proven and not found.stopped, (*said, *covered),
            space=(names.space if names else 0) + found.candidates,
            decisions=names.decisions if names else 0,
            rounds=names.rounds if names else 0,
            interactions=names.interactions if names else 0,
            noun=space.noun,
        )  # fmt: skip

    @property
    def bound_seconds(self) -> float | None:
        finite = self.bound is not None and self.bound != float("inf")
        return self.bound if self.cost == "seconds" and finite else None

    def to_dict(self) -> dict:
        finite = self.bound is not None and self.bound != float("inf")
        return {
            "method": self.method,
            "bound_seconds": self.bound_seconds,
            "gap": self.gap,
            "compiles": self.compiles,
            "assumptions": list(self.assumptions),
            "cost": self.cost,
            "bound": self.bound if finite else None,
            "best": self.best,
            "proven": self.proven,
            "space": self.space,
            "decisions": self.decisions,
            "rounds": self.rounds,
            "interactions": self.interactions,
        }


def model_assumptions(
    outcome: NameOutcome, space: Space, compiled: bool, cost_words: str
) -> list[str]:
    """What the model path assumed, in words (`search.exact.search`'s outcome)."""
    made = "compiles" if compiled else "analyses"
    out = [
        f"each of the {count(outcome.decisions, space.noun)} measured alone against "
        f"{space.empty_words} ({outcome.decisions + 1} {made})",
    ]
    if outcome.interactions:
        out.append(
            f"decisions taken together add up, except the "
            f"{count(outcome.interactions, 'interaction')} between them that "
            f"{'compiles' if compiled else 'analyses'} of them together showed (measured, "
            "and carried to every assignment that takes the same decisions)"
        )
    else:
        out.append(
            "decisions taken together add up (no "
            f"{'compile' if compiled else 'analysis'} of several together showed otherwise)"
        )
    if outcome.chains or outcome.chains_slower:
        out.append(
            f"the {count(len(outcome.chains), 'assignment')} of the greedy chains suggest "
            "searched before this search (names by recompute removed per byte) "
            f"{'compiled' if compiled else 'analysed'} first: the answer is no worse than "
            "that list's"
            + (" (its order here from each call's effect alone)" if space.per_call else "")
            + _chains_left_out(outcome)
        )
    if outcome.checked:
        out.append(
            f"{count(outcome.checked, 'assignment')} beyond the model's optimum compiled to check "
            "it, where interactions the model had not measured could hide a better answer"
        )
    if outcome.assumed:
        out.append(outcome.assumed)
    for function in space.per_call:
        calls = [p for p in space.places if p.function == function]
        out.append(
            f"the {len(calls)} calls of {function} decided one by one (sites "
            f"{calls[0].key}-{calls[-1].key})"
        )
    out += shared_calls_words(space)
    if not space.offload:
        out.append("offload not in the space: the device's compile has no host memory for it")
    out += outcome.left_out
    out.append(cost_words)
    out.append(
        "the built-in policies, the target's own and the structures: each compiled, or "
        "left out because the least cost it could have is above the answer's"
        if compiled
        else "the built-in policies, the target's own and the structures: each analysed"
    )
    if outcome.cancelled:
        out.append("stopped before the model's optimum was verified: the gap is what is left")
    elif not outcome.proven and outcome.bound is not None:
        out.append(
            f"stopped after {count(outcome.rounds, 'round')} without verifying the model's "
            "optimum: the gap is what is left"
        )
    return out


def shared_calls_words(space: Space) -> list[str]:
    """Where the calls of a function were given one policy together, why."""
    if not space.shared:
        return []
    calls = sum(1 for s in space.sites if s.function in space.shared)
    return [
        f"the calls of {', '.join(space.shared)} share one policy: {calls} calls times "
        f"{len(space.whole)} policies would be more decisions than the model takes "
        f"one by one ({POLICY_DECISIONS_AT_MOST})"
    ]


def enumeration_assumptions(compiled: bool, cost_words: str, cancelled: bool) -> list[str]:
    out = [
        "none: every configuration of the space was analysed"
        + (
            "; those not compiled could not cost less than the answer, even at the least "
            "cost they could have"
            if compiled
            else ""
        ),  # fmt: skip
        cost_words,
    ]
    if cancelled:
        out.append("stopped before every candidate that could be the answer was compiled")
    return out


def covered_words(count_left: int) -> str:
    """Why the splits `compile_in_order` left out as saving too much were not compiled."""
    return (
        f"{count(count_left, 'split')} saving, layer by layer, at least what a configuration "
        "compiled over the budget saves, taken not to fit and not compiled"
    )


def cost_words(source: str, chip: str | None) -> str:
    """What the cost is, in words (a row's `cost_source`)."""
    if source is CostSource.MEASURED:
        return "cost: the step's time measured on the device where run, else estimated"
    if source is CostSource.ESTIMATE:
        return f"cost: the estimated step time on {chip} (roofline)"
    return "cost: the recompute FLOPs"


def _chains_left_out(outcome: NameOutcome) -> str:
    """The chains' assignments not compiled, and why none could be the answer."""
    if not outcome.chains_slower:
        return ""
    return (
        f"; left out: {count(outcome.chains_slower, 'assignment')} whose least cost before "
        "compiling is above an answer's"
    )
