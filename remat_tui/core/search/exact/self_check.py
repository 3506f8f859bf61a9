"""Provides `SelfCheck`: the check the exact search (`search.exact.search`)
makes once its model's optimum is verified: compile the model's best
assignment not yet evaluated that the interactions the model has not
measured could make better than the answer, until none could.

The model (`search.exact.model`) is exact at every assignment evaluated;
elsewhere it misses what its decisions do together that no evaluated set
inside the assignment measured: the pairs `Model.unmeasured_pairs` counts.
How large such an interaction can be is read from those it did measure:
the weight of each evaluated set of two or more decisions is exactly what
the model would have mispredicted that set by without its compile (its
prediction from the sets inside it). Each decision is charged the largest
such weight that lowered the cost or a peak among the sets it is in, where
it is what the set added to one evaluated (a chain's last name: the chain's
interaction is that name's with its prefix, not every pair's inside it); an
unmeasured pair is given the smaller charge of its two decisions (an
interaction needs both: a decision that has interacted little with every
partner measured is taken to interact as little with the rest); an
assignment not evaluated whose every pair is measured, the largest
interaction measured among three or more. And no assignment is given more
in all than the largest error a prediction made before its compile showed
(the chains', the model's answers', these checks'): the error the search
assumed everywhere before it kept the slack per pair.

So a duplicate pair (two names that are one value, which XLA computes
once) makes every chain that holds it err by its whole interaction; once
compiled, it widens the check only where both of its decisions meet a
partner never measured with them, not everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from remat_tui.core.search.exact.model import PAIRS_AT_MOST, Assignment, Model, Slack, Solution
from remat_tui.core.search.rows import Row
from remat_tui.core.units import count


@dataclass
class SelfCheck:
    """What the model's predictions, checked by compiles, showed, and the
    slack it gives what it has not measured (`Model.slack`)."""

    seen: int = 0  # predictions made before their compile, checked by it
    largest: float = 0.0  # the most one was over the cost, a share of its compile's cost
    over: float = 0.0  # the most one was over the peak, in bytes
    slack: Slack | None = None  # the slack of the last check

    def saw(self, cost: float, peak: float, row: Row, pairs: int) -> None:
        """The model said `cost` and `peak` of what `row` compiled to, with
        `pairs` of its decisions unmeasured together."""
        self.seen += 1
        if not row.fits or row.measure_failed or row.cost[0] <= 0:
            return  # no numbers to compare: it did not compile within the device
        self.largest = max(self.largest, (cost - row.cost[0]) / row.cost[0])
        self.over = max(self.over, peak - row.weighed_bytes)

    def worth_checking(
        self, model: Model, budget: int, evaluated: list[Assignment], best: Row | None
    ) -> Solution | None:
        """The assignment not yet evaluated whose cost, less the slack of its
        unmeasured pairs, is least among those whose peak, less the same,
        is within the budget, if that least cost is below the best verified
        (or, where no interaction has been measured yet, to measure one).
        Its `bound` is that least cost: what nothing left unchecked can beat,
        as far as the interactions measured go."""
        if best is None:
            return None
        self.slack = model.slack()
        if self.slack is None or not (self.seen or self.slack.per_pair):
            # Nothing measured yet to weigh what was not: the model's best
            # assignment not evaluated, compiled once to find out.
            return None if self.seen else model.solve(budget, skip=evaluated)
        if self.seen:
            self.slack = replace(self.slack, most=(self.largest, self.over))
        candidate = model.solve(budget, skip=evaluated, slack=self.slack)
        if candidate is None or candidate.bound >= best.cost[0]:
            return None
        return candidate

    def words(self, proven: bool, answer: Row | None, compiled: bool = True) -> str:
        """What the check assumed, in words (`compiled` False: the residual
        measure, where assignments are analysed, not compiled)."""
        slack = self.slack
        if slack is None:
            return ""
        made, making = ("compiled", "compiling") if compiled else ("analysed", "analysing")
        # what the model's memory is: the compiled peak, or the residual bytes
        memory, a_memory = ("the peak", "a peak") if compiled else ("the residual bytes",) * 2
        cost, peak = max(slack.cost), max(slack.peak)
        # Shared where the answer costs something (a cost of 0: nothing recomputed).
        whole = answer.cost[0] if answer is not None else 0
        largest = f"{cost / whole:.1%} of the answer's cost" if whole > 0 else f"{cost:.3g}"
        capped = (
            f"the largest error of the {count(self.seen, 'prediction')} checked by {making} "
            f"({self.largest:.1%} of the cost, {self.over:,.0f} B of {memory})"
        )
        if not slack.per_pair:
            said = (
                f"where nothing was {made} (more than {PAIRS_AT_MOST} pairs of decisions, too "
                f"many to weigh one by one): no assignment assumed to lower the cost or {memory} "
                f"by more than {capped}"
            )
        else:
            said = (
                f"where nothing was {made}: each pair of decisions never {made} together "
                f"assumed to lower the cost and {a_memory} no more than the smaller of its two "
                f"decisions' largest interaction measured (the largest: {largest}, {peak:,.0f} B "
                f"of {a_memory})"
            )
            if self.seen:
                said += f", and no assignment by more in all than {capped}"
        if proven:
            said += f"; every assignment that errors that large could make better was {made}"
        return said
