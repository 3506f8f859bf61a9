"""Provides `Model`: the exact search's model of what each decision does to
the compiled peak and the step's cost (Contract 12), exact at every
assignment evaluated, and `Model.solve`, its optimum under a budget, found
exactly by a mixed-integer program.

An assignment is the set of decisions it takes (a name saved or offloaded
at a place); every decision not taken recomputes. The peak is the larger of
its parts' peaks (the forward part's and the backward part's, read from
each compile's memory curve: a compiled peak moves between them, and a
decision that adds to the part that is not the peak adds nothing to the
peak until that part becomes it). Each quantity (each part's peak, the
cost, the bytes sent to host) is modelled as a sum over the sets of
decisions the search evaluated together:

    q(A) = sum of w(S) over every evaluated set S contained in A

with the weights chosen so that q equals what was measured at every
evaluated assignment (`w(S)` is what S measured, less the weights of the
evaluated sets inside it: a Möbius inversion over the evaluated sets). With
the empty set (everything recomputed) and each decision alone evaluated,
that is each decision's own effect, added up; each further evaluation adds
what its decisions did together beyond that (their interaction), carried to
every assignment that takes all of them. Nothing else is assumed to
interact: that is what the model assumes, and the search says so.

Solved by `scipy.optimize.milp` (HiGHS, a maintained solver that comes with
JAX's own dependency on scipy) with no optimality gap tolerated
(`mip_rel_gap` 0): binary variables per decision, one per evaluated set of
two or more (their conjunction, linearised), at most one state per name and
place, each part's peak within the budget, and a cut excluding each
assignment known not to fit. Quantities are scaled to about 1 before
solving. Ties in cost are broken as suggest's rows are: fewer bytes sent to
host, then less memory (the parts' peaks summed), then fewer decisions
(each a further solve with the previous optimum held).

`Model.solve(slack=...)` weighs each assignment as it could be at best
where the model has not measured all of it (the self-check's question,
`search.exact.self_check`): its cost and peaks lowered by a slack per pair
of its decisions that no evaluated set inside it holds (`Slack`), with a
continuous variable per such pair.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

Assignment = frozenset[int]  # the decisions taken, by index; the rest recompute
Values = dict[str, float]  # quantity ("cost", "host", each part's peak) -> its value
PARTS = ("forward", "backward")  # the parts whose peaks are modelled
TIE = 1e-9  # relative slack when an optimum is held while the next tie-break is solved
PAIRS_AT_MOST = 300  # pairs of decisions weighed one by one with a slack (about 25 decisions)


@dataclass(frozen=True)
class Slack:
    """How far the model may be from a compile where it has not evaluated an
    assignment, per pair of the assignment's decisions that no evaluated
    set inside it holds together: per decision, the most an interaction of
    it has lowered the cost (in the cost's unit) and a part's peak (bytes)
    where a compile measured it (Model.slack); a pair is given the smaller
    of its two decisions'. An assignment not evaluated whose every pair is
    measured is given `beyond`: what the model cannot carry there is among
    three or more decisions, so the most an evaluated set of three or more
    lowered the cost and a peak beyond the sets inside it. `most`: no
    assignment is given more in all than that share of its cost and those
    bytes of its peak (the largest errors a prediction has shown,
    `search.exact.self_check`). `per_pair` False (more pairs than PAIRS_AT_MOST: a
    variable each would make the program too large to solve in a round):
    every assignment not evaluated is given `most`."""

    cost: tuple[float, ...]
    peak: tuple[float, ...]
    beyond: tuple[float, float] = (0.0, 0.0)
    most: tuple[float, float] = (np.inf, np.inf)
    per_pair: bool = True

    def pair(self, i: int, j: int) -> tuple[float, float]:
        return min(self.cost[i], self.cost[j]), min(self.peak[i], self.peak[j])


@dataclass(frozen=True)
class Solution:
    """The model's optimum: the assignment, and what the model says of it."""

    assignment: Assignment
    cost: float
    peak: float
    host: float
    bound: float  # the least cost the model allows within the budget (less its slack, if any)


@dataclass
class Model:
    """The model over `size` decisions; `exclusive`: groups of decisions of
    which an assignment takes at most one (the states of one name at one
    place); `parts`: the parts of the program whose peaks are modelled."""

    size: int
    exclusive: list[tuple[int, ...]]
    parts: tuple[str, ...] = PARTS
    measured: dict[Assignment, Values] = field(default_factory=dict)
    excluded: set[Assignment] = field(default_factory=set)  # assignments known not to fit
    forbidden: set[int] = field(default_factory=set)  # decisions that never fit, even alone
    _weights: dict[Assignment, Values] | None = field(default=None, repr=False)

    @property
    def quantities(self) -> tuple[str, ...]:
        return ("cost", "host", *self.parts)

    def observe(self, assignment: Iterable[int], peaks: Values, cost: float, host: float) -> None:
        """What evaluating `assignment` showed (`peaks`: each part's): the
        model is exact there from now."""
        self.measured[frozenset(assignment)] = {**peaks, "cost": cost, "host": host}
        self._weights = None

    def exclude(self, assignment: Iterable[int]) -> None:
        """An assignment known not to fit (its compile ran out of memory, or
        failed): never the model's answer again."""
        self.excluded.add(frozenset(assignment))

    def forbid(self, decision: int) -> None:
        """A decision that does not fit even alone: left out with every
        assignment that takes it."""
        self.forbidden.add(decision)

    @property
    def interactions(self) -> int:
        """Sets of two or more decisions whose measured interaction the model carries."""
        return sum(1 for s, w in self.weights().items() if len(s) > 1 and _nonzero(w))

    def weights(self) -> dict[Assignment, Values]:
        """Assignment -> {quantity: its weight}, smallest sets first (the
        Möbius inversion of the module doc)."""
        if self._weights is None:
            weights: dict[Assignment, Values] = {}
            for s in sorted(self.measured, key=len):
                inner = [t for t in weights if t < s]
                weights[s] = {
                    q: self.measured[s][q] - sum(weights[t][q] for t in inner)
                    for q in self.quantities
                }
            self._weights = weights
        return self._weights

    def predict(self, assignment: Iterable[int]) -> Values:
        """{quantity: the model's value} for any assignment, "peak" the
        largest part's."""
        a = frozenset(assignment)
        terms = [w for s, w in self.weights().items() if s <= a]
        values = {q: sum(w[q] for w in terms) for q in self.quantities}
        return {**values, "peak": max(values[p] for p in self.parts)}

    def unmeasured_pairs(self, assignment: Iterable[int]) -> int:
        """The pairs of the assignment's decisions that no evaluated set inside
        it holds together: the interactions the model's prediction of it
        cannot carry."""
        a = frozenset(assignment)
        inside = [s for s in self.measured if len(s) > 1 and s <= a]
        return sum(1 for i, j in combinations(sorted(a), 2)
                   if not any(i in s and j in s for s in inside))  # fmt: skip

    def slack(self) -> Slack | None:
        """Each decision's largest measured interaction (Slack): the weight
        of an evaluated set of two or more is what the model, without that
        compile, would have mispredicted it by (its prediction from the
        sets inside it), so each such weight that lowers the cost or a
        peak is charged to the decisions that set added to one evaluated
        already (those whose removal leaves an evaluated set: a chain's
        last name, whose interaction with the prefix it is), or to every
        decision of the set where none did. A decision in no such set is
        given the largest charged to any; None where no set is evaluated
        (nothing yet shows how the decisions interact)."""
        cost, peak = [0.0] * self.size, [0.0] * self.size
        beyond = [0.0, 0.0]
        charged = set()
        for s, w in self.weights().items():
            if len(s) < 2:
                continue
            lowered = max(-w["cost"], 0.0), max(*(-w[p] for p in self.parts), 0.0)
            # A prefix of two or more evaluated: what the set measured beyond
            # it is its added decisions' (charging the prefix too would give
            # every pair inside a long chain the chain's last interaction).
            added = [i for i in s if len(s) > 2 and s - {i} in self.measured]
            for i in added or s:
                cost[i], peak[i] = max(cost[i], lowered[0]), max(peak[i], lowered[1])
                charged.add(i)
            if len(s) > 2:
                beyond = [max(beyond[0], lowered[0]), max(beyond[1], lowered[1])]
        if not charged:
            return None
        for i in set(range(self.size)) - charged:
            cost[i], peak[i] = max(cost), max(peak)
        per_pair = len(_open_pairs(self)) <= PAIRS_AT_MOST
        return Slack(tuple(cost), tuple(peak), (beyond[0], beyond[1]), per_pair=per_pair)

    def solve(
        self, budget: float, skip: Iterable[Iterable[int]] = (), slack: Slack | None = None
    ) -> Solution | None:
        """The least cost the model gives an assignment whose peak is within
        `budget`, and that assignment (ties broken as the module doc says);
        None when the model fits nothing. `skip`: assignments left out of this
        solve (those evaluated already, to find the best of the rest). With
        `slack`, each assignment is weighed as it could be at best: its cost
        and peaks less the slack per unmeasured pair (`unmeasured_pairs`, at
        least one), the solution's `bound` that least cost. Needs the empty
        assignment measured."""
        weights = self.weights()
        if frozenset() not in weights:
            raise ValueError("the model needs everything recomputed measured first")
        return _Program(self, weights, budget, skip, slack).solve()


def _nonzero(w: Values) -> bool:
    return any(abs(v) > 0 for v in w.values())


class _Program:
    """The mixed-integer program of one solve: variables x (a decision taken)
    then z (every decision of an evaluated set of two or more taken), and,
    with a slack, u (a pair of decisions taken that no evaluated set taken
    holds), v (no such pair), and the slack taken off the cost and off each
    part's peak (at most their pairs' and v's, and at most `most`), scaled
    as the cost and the peak are."""

    def __init__(
        self,
        model: Model,
        weights: dict[Assignment, Values],
        budget: float,
        skip: Iterable[Iterable[int]] = (),
        slack: Slack | None = None,
    ) -> None:
        self.model, self.budget = model, budget
        self.skip = {frozenset(a) for a in skip} | model.excluded
        self.base = weights[frozenset()]
        self.sets = [s for s in weights if s]
        self.pairs = [s for s in self.sets if len(s) > 1]  # the z variables
        n = model.size
        self.slack = slack
        weighed = slack is not None and slack.per_pair
        self.open = _open_pairs(model) if weighed else []  # the u variables
        self.width = n + len(self.pairs) + (len(self.open) + 3 if slack is not None else 0)
        self.rows: list[np.ndarray] = []
        self.low: list[float] = []
        self.high: list[float] = []
        self.coeff = {q: np.zeros(self.width) for q in model.quantities}
        for s in self.sets:
            column = next(iter(s)) if len(s) == 1 else n + self.pairs.index(s)
            for q in model.quantities:
                self.coeff[q][column] += weights[s][q]
        self.coeff["memory"] = sum((self.coeff[p] for p in model.parts), np.zeros(self.width))
        # Scales: the budget for bytes; the largest magnitude for the rest.
        self.scale = {q: _magnitude(self.coeff[q], self.base.get(q, 0.0))
                      for q in ("cost", "host", "memory")}  # fmt: skip
        self.scale["peak"] = max(abs(budget), 1.0)
        self.upper = np.ones(self.width)
        if slack is not None:  # the slack taken off the cost and off each part's peak
            self.predicted = self.coeff["cost"] / self.scale["cost"]  # for its cap (_unmeasured)
            self.coeff["cost"][-2] = -self.scale["cost"]
            for part in model.parts:
                self.coeff[part][-1] = -self.scale["peak"]
            self.upper[-2:] = np.inf
            self.upper[-1] = slack.most[1] / self.scale["peak"]
        self._constraints()

    def _add(self, row: np.ndarray, low: float, high: float) -> None:
        self.rows.append(row)
        self.low.append(low)
        self.high.append(high)

    def _constraints(self) -> None:
        n, width = self.model.size, self.width
        for group in self.model.exclusive:
            row = np.zeros(width)
            row[list(group)] = 1
            self._add(row, -np.inf, 1)
        for k, s in enumerate(self.pairs):  # z = AND(x in s), with z in [0, 1]
            for i in s:
                row = np.zeros(width)
                row[n + k], row[i] = 1, -1
                self._add(row, -np.inf, 0)
            row = np.zeros(width)
            row[n + k] = 1
            row[list(s)] = -1
            self._add(row, 1 - len(s), np.inf)
        if self.slack is not None:
            self._unmeasured()
        peak = self.scale["peak"]
        for part in self.model.parts:
            self._add(self.coeff[part] / peak, -np.inf, (self.budget - self.base[part]) / peak)
        for bad in self.skip:  # at least one decision differs from `bad`
            row = np.zeros(width)
            row[list(bad)] = -1
            others = [i for i in range(n) if i not in bad]
            row[others] = 1
            self._add(row, 1 - len(bad), np.inf)

    def _unmeasured(self) -> None:
        """u_ij <= x_i, x_j, and 1 - z_S for each evaluated S holding both (at
        its best the assignment takes u_ij = 1 exactly where the pair is
        taken and unmeasured); v <= 1 - (x_i + x_j - 1 - the sum of those
        z_S) for every pair: 0 where any pair is taken and unmeasured. The
        slack taken off the cost (and off the peaks) is at most the sum of
        the slacks of the pairs taken, and of v; off the cost, at most
        `most`'s share of the cost predicted."""
        assert self.slack is not None
        n, width, first = self.model.size, self.width, self.model.size + len(self.pairs)
        v = width - 3
        given = [self.slack.pair(i, j) for i, j in self.open] + [self.slack.beyond]
        for k, (column, scale) in enumerate(((width - 2, "cost"), (width - 1, "peak"))):
            if not self.slack.per_pair:
                break  # no pairs weighed: each slack is its cap alone
            row = np.zeros(width)
            row[column] = 1
            row[first : width - 2] = [-g[k] / self.scale[scale] for g in given]
            self._add(row, -np.inf, 0)
        share = self.slack.most[0]
        if share != np.inf:
            row = -share * self.predicted
            row[width - 2] = 1
            self._add(row, -np.inf, share * self.base["cost"] / self.scale["cost"])
        for k, (i, j) in enumerate(self.open):
            u = first + k
            holding = [n + m for m, s in enumerate(self.pairs) if i in s and j in s]
            for other in (i, j, *holding):
                row = np.zeros(width)
                row[u] = 1
                row[other] = 1 if other >= n else -1  # u <= x_i; u + z_S <= 1
                self._add(row, -np.inf, 1 if other >= n else 0)
            row = np.zeros(width)
            row[v], row[i], row[j] = 1, 1, 1
            row[holding] = -1
            self._add(row, -np.inf, 2)

    def solve(self) -> Solution | None:
        from scipy.optimize import Bounds, LinearConstraint, milp

        n = self.model.size
        integrality = np.r_[np.ones(n), np.zeros(self.width - n)]
        upper = self.upper.copy()
        upper[list(self.model.forbidden)] = 0
        bounds = Bounds(np.zeros(self.width), upper)
        held: list[tuple[np.ndarray, float]] = []  # optima held while breaking ties
        x, bound = None, None
        count = np.r_[np.ones(n), np.zeros(self.width - n)]  # fewer decisions: last tie-break
        objectives = [*(self.coeff[q] / self.scale[q] for q in ("cost", "host", "memory")), count]
        for objective in objectives:
            rows = [*self.rows, *(h for h, _ in held)]
            high = [*self.high, *(v for _, v in held)]
            low = [*self.low, *(-np.inf for _ in held)]
            constraints = LinearConstraint(np.array(rows), np.array(low), np.array(high))
            result = milp(
                objective, integrality=integrality, bounds=bounds, constraints=constraints,
                options={"mip_rel_gap": 0.0, "presolve": True},
            )  # fmt: skip
            if result.x is None:
                if x is None:
                    return None  # nothing the model knows of fits
                break  # a tie-break that the solver could not hold: keep the last optimum
            x = result.x
            if bound is None:
                bound = self.base["cost"] + result.fun * self.scale["cost"]
            held.append((objective, result.fun + TIE * max(abs(result.fun), 1.0)))
        # The first objective (the cost) solved, or this returned None above.
        assert x is not None and bound is not None
        chosen = frozenset(i for i in range(n) if x[i] > 0.5)
        values = self.model.predict(chosen)
        return Solution(chosen, values["cost"], values["peak"], values["host"], bound)


def _open_pairs(model: Model) -> list[tuple[int, int]]:
    """The pairs of decisions an assignment can take together: not two
    states of one name at one place, neither forbidden."""
    together = {frozenset(p) for g in model.exclusive for p in combinations(g, 2)}
    allowed = [i for i in range(model.size) if i not in model.forbidden]
    return [(i, j) for i, j in combinations(allowed, 2) if frozenset((i, j)) not in together]


def _magnitude(coefficients: np.ndarray, base: float) -> float:
    """What a quantity's coefficients are scaled by: about their size."""
    largest = max(float(np.max(np.abs(coefficients))) if coefficients.size else 0.0, abs(base))
    return largest if largest > 0 else 1.0
