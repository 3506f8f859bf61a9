"""Provides `search_names`: the exact search over every name decision at every
place (Contract 12), which suggest runs where the space is too large to
list.

1. Everything recomputed, and each decision alone (`search.exact.space`),
   analysed without compiling; a decision whose residuals, recompute and host
   bytes are those of everything recomputed changes nothing (its name is not
   at that place, or the backward pass does not read it) and is left out.
2. The rest compiled (or, for the residual measure, only analysed), side by
   side where compiles can run elsewhere (`xla.run.pool`): the
   model's first points (`search.exact.model`).
3. The model solved exactly; its answer compiled. Where the compile
   disagrees with the model, the model takes what it showed (it is exact at
   every assignment evaluated) and is solved again, until its optimum is an
   assignment already evaluated: then the compiled answer is the model's
   optimum, and the model's least cost is the bound it is proven against.
4. The check (`search.exact.self_check`): the model's best assignment not
   yet evaluated that the interactions it has not measured could make
   better than the answer (as large as those it measured, per pair of
   decisions) is compiled, and the model converges again, until none could.

A compile that runs out of memory (or fails) excludes its assignment; a
decision that does not fit even alone is left out with every assignment
that takes it. A stop (the evaluator's `stopped()`) keeps the best
assignment verified so far, with the gap to the model's last bound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from remat_tui.core.search.exact.model import Assignment, Model, Solution, Values
from remat_tui.core.search.exact.self_check import SelfCheck
from remat_tui.core.search.exact.space import SAVE, Space
from remat_tui.core.search.rows import Row
from remat_tui.core.setup.config import Config
from remat_tui.core.trace.configured import Cancelled
from remat_tui.core.units import count

ROUNDS_PER_DECISION, ROUNDS_AT_LEAST = 2, 24  # the model's answers compiled before giving up


class Evaluates(Protocol):
    """What the search asks of whoever evaluates its assignments (suggest's
    `Evaluator`; a test's table of made-up rows)."""

    @property
    def budget(self) -> int: ...

    @property
    def compiling(self) -> bool:
        """Whether assignments are compiled (False: the residual measure,
        where they are only analysed)."""
        ...

    @property
    def least(self) -> Callable[[Row], tuple] | None:
        """A row's least cost before compiling, in the unit of its cost;
        None where nothing is compiled."""
        ...

    def analyse(self, configs: Sequence[Config]) -> list[Row]:
        """Their rows, without compiling."""
        ...

    def compile(self, rows: Sequence[Row]) -> None:
        """Compile those of `rows` not compiled yet, in place."""
        ...

    def is_answer(self, row: Row) -> bool:
        """Whether an evaluated row could be the answer (within the budget)."""
        ...

    def stopped(self) -> bool:
        """Whether the user asked to stop."""
        ...


@dataclass(frozen=True)
class Narrowing:
    """What the search knows as it narrows: the model's least cost within
    the budget (`bound`), the best verified (`best`), the gap between them
    (a share of `best`), and how many configurations it has compiled;
    `unit`: what the costs are counted in (the rows' `cost_unit`: "seconds"
    or "flops"), so that they are said in it.
    The bound is the model's, over its decisions (`of`): the other
    candidates (built-ins, structures) are weighed after it, and the
    answer's bound is over them all."""

    bound: float | None
    best: float | None
    compiles: int
    round: int
    unit: str
    of: str = "name decisions"  # what the model decides, in words

    @property
    def gap(self) -> float | None:
        return gap(self.best, self.bound)


@dataclass
class NameOutcome:
    """What search_names found."""

    rows: list[Row]  # every assignment evaluated
    answer: Row | None  # the best verified within the budget, or None
    bound: float | None  # the model's least cost within the budget (inf: it fits none)
    proven: bool  # the answer is the model's optimum
    rounds: int  # the model's answers evaluated
    interactions: int  # sets of decisions whose interaction the model carries
    decisions: int
    space: int  # assignments of the decisions kept
    left_out: list[str] = field(default_factory=list)  # decisions left out, and why
    cancelled: bool = False
    checked: int = 0  # assignments compiled beyond the model's optimum, to check it
    # The greedy chains' assignments compiled, each as its names.
    chains: list[list[str]] = field(default_factory=list)
    chains_slower: int = 0  # chain assignments left out: least cost above an answer's
    assumed: str = ""  # what the self-check assumed of what it did not compile, in words


def gap(best: float | None, bound: float | None) -> float | None:
    """How far `best` may be from the optimum, as a share of it (0: none)."""
    if best is None or bound is None or best <= 0:
        return None
    return max(best - bound, 0.0) / best


def search_names(
    space: Space,
    evaluator: Evaluates,
    narrowing: Callable[[Narrowing], object] | None = None,
    incumbent: float | None = None,
    max_rounds: int | None = None,
) -> NameOutcome:
    """Search the decisions of `space` (the module doc), evaluating the
    assignments by `evaluator`. `incumbent`: the cost of the best answer
    found elsewhere, for the gap shown while searching. `narrowing` hears the
    bound, best and gap as they narrow; `max_rounds`: the model's answers it
    compiles before stopping unproven."""
    stop, budget, analyse = evaluator.stopped, evaluator.budget, evaluator.analyse
    is_answer = evaluator.is_answer
    rows_of: dict[Assignment, Row] = {}  # assignment -> its row

    def evaluate(assignments: list[Assignment]) -> list[Row]:
        rows = analyse([space.config(a) for a in assignments])
        try:
            evaluator.compile(rows)
        except Cancelled:  # what compiled before the stop is kept, for the answer
            done = [(a, r) for a, r in zip(assignments, rows, strict=True) if r.compiled or r.error]
            rows_of.update(done)
            raise
        rows_of.update(zip(assignments, rows, strict=True))
        return rows

    empty: Assignment = frozenset()
    singles = [frozenset([i]) for i in range(len(space.decisions))]
    analysed = analyse([space.config(a) for a in (empty, *singles)])
    left_out = _changing_nothing(space, analysed)
    kept = [i for i, row in enumerate(analysed[1:]) if not _same(row, analysed[0])]
    space.keep(kept)
    singles = [frozenset([i]) for i in range(len(space.decisions))]
    model = Model(len(space.decisions), space.exclusive())
    outcome = NameOutcome([], None, None, False, 0, 0, len(space.decisions), space.size(),
                          left_out)  # fmt: skip
    if stop():
        outcome.cancelled = True
        return outcome
    self_check = SelfCheck()

    def search() -> None:
        for assignment, row in zip((empty, *singles), evaluate([empty, *singles]), strict=True):
            _record(model, assignment, row, outcome, space)
        if empty not in model.measured:
            outcome.left_out.append(_cannot_model(rows_of[empty], space))
            return
        # The list suggest searched before this search: its chains of names,
        # compiled now, so that the answer is never worse than that list's, and
        # the model's error is seen where the model did not choose what to
        # compile (its own answers are where it is most optimistic).
        chains = greedy_chains(
            space, rows_of[empty], {i: rows_of[s] for i, s in enumerate(singles)}
        )
        chains = [[c for c in chain if not c & model.forbidden] for chain in chains]
        # analysing is cheap: every chain's assignment, where nothing is compiled
        for wave in _chain_waves(chains, is_answer, rows_of, evaluator, space, outcome):
            if stop():
                break
            predicted = [(model.predict(c), model.unmeasured_pairs(c)) for c in wave]
            for chain, (guess, pairs), row in zip(wave, predicted, evaluate(wave), strict=True):
                self_check.saw(guess["cost"], guess["peak"], row, pairs)
                _record(model, chain, row, outcome, space)
                outcome.chains.append(sorted({space.decisions[i].name for i in chain}))
        rounds_left = max_rounds
        if rounds_left is None:
            rounds_left = max(ROUNDS_PER_DECISION * len(space.decisions), ROUNDS_AT_LEAST)

        def compile_answer(solution: Solution) -> None:
            pairs = model.unmeasured_pairs(solution.assignment)
            (row,) = evaluate([solution.assignment])
            outcome.rounds += 1
            self_check.saw(solution.cost, solution.peak, row, pairs)
            _record(model, solution.assignment, row, outcome, space)

        while True:
            proven = _converge(model, evaluator, rows_of, outcome, narrowing, incumbent,
                               lambda: outcome.rounds >= rounds_left, compile_answer,
                               space.noun)  # fmt: skip
            if not proven or stop():
                break
            # The model's optimum is verified. What the model has not measured may
            # still surprise it: compile its best assignment not yet evaluated
            # where the errors it has shown (`search.exact.self_check`) could make it beat
            # the answer; then converge again with what that compile showed.
            check = self_check.worth_checking(
                model, budget, list(rows_of), _best(rows_of, is_answer)
            )
            if check is None:
                break
            if outcome.rounds >= rounds_left:  # a check left undone: not proven, and its bound
                outcome.proven = False
                assert outcome.bound is not None  # _converge proved it: its solve set the bound
                outcome.bound = min(outcome.bound, check.bound)
                break
            outcome.checked += 1
            compile_answer(check)

    # A stop raised inside a compile (the CLI's Ctrl-C, the app's escape)
    # keeps what was evaluated: the best verified so far is the answer.
    try:
        search()
    except Cancelled:
        outcome.cancelled, outcome.proven = True, False
    outcome.rows = list(rows_of.values())
    outcome.answer = _best(rows_of, is_answer)
    outcome.interactions = model.interactions
    outcome.assumed = self_check.words(outcome.proven, outcome.answer, evaluator.compiling)
    return outcome


def _converge(
    model: Model,
    evaluator: Evaluates,
    rows_of: dict[Assignment, Row],
    outcome: NameOutcome,
    narrowing: Callable[[Narrowing], object] | None,
    incumbent: float | None,
    out_of_rounds: Callable[[], bool],
    compile_answer: Callable[[Solution], None],
    noun: str = "name decision",
) -> bool:
    """Solve, compile the model's answer, correct, until the model's optimum
    is an assignment evaluated within the budget (True: proven within the
    model), the model fits nothing (True), or a stop or the rounds end it."""
    while True:
        best = _best(rows_of, evaluator.is_answer)
        solution = model.solve(
            evaluator.budget
        )  # milliseconds: solved even when stopping, for the bound
        if solution is None:  # the model fits nothing: nothing it knows of can
            outcome.bound, outcome.proven = float("inf"), True
            return True
        outcome.bound = solution.bound
        if narrowing is not None:
            verified = best.cost[0] if best is not None else None
            costs = [c for c in (incumbent, verified) if c is not None]
            # the model's costs are its rows' (`observe`), so is their unit
            unit = next((r.cost_unit for r in rows_of.values()), "flops")
            narrowing(Narrowing(solution.bound, min(costs, default=None),
                                len(rows_of), outcome.rounds, unit, noun + "s"))  # fmt: skip
        seen = rows_of.get(solution.assignment)
        if seen is not None:
            if evaluator.is_answer(seen):
                outcome.proven = True
                return True
            model.exclude(solution.assignment)  # at the budget's very edge: the compile decides
            continue
        outcome.proven = False
        if (
            evaluator.stopped()
        ):  # before the next compile: the best verified stays, with the gap to the bound
            outcome.cancelled = True
            return False
        if out_of_rounds():
            return False
        compile_answer(solution)


def _chain_waves(
    chains: list[list[Assignment]],
    is_answer: Callable[[Row], bool],
    rows_of: dict[Assignment, Row],
    evaluator: Evaluates,
    space: Space,
    outcome: NameOutcome,
) -> Iterator[list[Assignment]]:
    """The chains' assignments to evaluate, one of each chain at a time
    (shortest first), so that what the shorter ones showed leaves out the
    longer ones that cannot be the answer (counted in `outcome`): where
    assignments are compiled, one whose least cost before compiling is above
    the best evaluated answer's cost. A chain over the budget goes on: saving
    more can lower a compiled peak (XLA schedules the program anew), and what
    the chains show of how names interact is what the self-check weighs
    everything not compiled by."""
    left = [list(chain) for chain in chains]

    least = evaluator.least

    def worth(assignment: Assignment) -> bool:
        best = _best(rows_of, is_answer)
        if least is not None and best is not None:
            (row,) = evaluator.analyse([space.config(assignment)])
            if least(row) > best.estimated_cost:
                outcome.chains_slower += 1
                return False
        return True

    while True:
        wave: dict[int, Assignment] = {}  # chain -> its next assignment
        for k, chain in enumerate(left):
            while chain and k not in wave:
                assignment = chain.pop(0)
                if assignment not in rows_of and assignment not in wave.values():
                    if worth(assignment):
                        wave[k] = assignment
        if not wave:
            return
        yield list(wave.values())


def greedy_chains(space: Space, empty: Row, alone: dict[int, Row]) -> list[list[Assignment]]:
    """The assignments that the list suggest searched before this search
    tried, one chain per state (names added by the recompute they remove
    alone per byte they add alone, device bytes for a save, host bytes for
    an offload; the same state of a name at every place, each place's
    effect measured alone and summed), each shortest first; the rows of
    each decision `alone` and of everything recomputed (`empty`) measured."""
    chains: list[list[Assignment]] = []
    for state in space.states:
        # name -> [recompute removed, bytes added], over its places
        gains: dict[str, list[int]] = {}
        for i, row in alone.items():
            decision = space.decisions[i]
            if decision.state != state or not row.fits or row.measure_failed:
                continue
            added = row.weighed_bytes - empty.weighed_bytes if state == SAVE else row.host_bytes
            gain = gains.setdefault(decision.name, [0, 0])
            gain[0] += max(empty.recompute_flops - row.recompute_flops, 0)
            gain[1] += added
        order = sorted(gains, key=lambda n: (gains[n][0] / max(gains[n][1], 1), n), reverse=True)
        chain = []
        for k in range(1, len(order) + 1):  # one name: a single decision where it has one place
            chosen = set(order[:k])
            chain.append(frozenset(i for i, d in enumerate(space.decisions)
                                   if d.state == state and d.name in chosen))  # fmt: skip
        chains.append(list(dict.fromkeys(chain)))
    return chains


def _record(
    model: Model, assignment: Assignment, row: Row, outcome: NameOutcome, space: Space
) -> None:
    """What an evaluated row tells the model: its numbers where it compiled,
    else that it does not fit."""
    if row.fits and not row.measure_failed:
        model.observe(assignment, part_peaks(row), row.cost[0], row.host_bytes)
        return
    model.exclude(assignment)
    if len(assignment) == 1:
        (i,) = assignment
        model.forbid(i)
        why = row.failure or "it does not fit the device"
        outcome.left_out.append(f"{space.decisions[i].label}: {why}, even alone; left out")


def part_peaks(row: Row) -> Values:
    """The peaks of the forward and the backward part (exact_model.PARTS),
    from the compile's memory curve split where its backward part starts,
    each with what XLA allocates beyond the bytes live at the peak (the
    row's memory less the curve's peak) added, so that the larger is the
    row's memory; both the row's memory where no curve is known (the
    residual measure, a compile without its breakdown)."""
    weighed = row.weighed_bytes
    memory = (row.compiled.memory if row.compiled else None) or {}
    split, curve = memory.get("backward_from"), memory.get("curve")
    if split is None or not curve:
        return {"forward": weighed, "backward": weighed}
    forward = max((b for step, b in curve if step < split), default=0)
    backward = max((b for step, b in curve if step >= split), default=0)
    slack = weighed - max(forward, backward)
    return {"forward": forward + slack, "backward": backward + slack}


def _best(rows_of: dict[Assignment, Row], is_answer: Callable[[Row], bool]) -> Row | None:
    """The best row evaluated that is an answer: least cost, then host
    bytes, then memory."""
    answers = [r for r in rows_of.values() if is_answer(r)]
    return min(answers, key=lambda r: (r.cost, r.weighed_bytes), default=None)


def _same(row: Row, empty: Row) -> bool:
    """A decision that changes nothing: the same residuals, recompute and
    host bytes as everything recomputed."""
    return (row.residuals, row.recompute_flops, row.host_bytes) == (
        empty.residuals, empty.recompute_flops, empty.host_bytes)  # fmt: skip


def _changing_nothing(space: Space, analysed: list[Row]) -> list[str]:
    """Why decisions that change nothing are left out, in words."""
    idle = [d for d, row in zip(space.decisions, analysed[1:], strict=True)
            if _same(row, analysed[0])]  # fmt: skip
    if not idle:
        return []
    shown = ", ".join(d.label for d in idle[:3]) + (", ..." if len(idle) > 3 else "")
    return [
        f"{count(len(idle), 'decision')} change nothing (the name is not at that place, or "
        f"the backward pass does not read it): left out ({shown})"
    ]


def _cannot_model(row: Row, space: Space) -> str:
    why = row.failure or "it does not fit the device"
    return (
        f"{space.empty_words} does not compile ({why}): the {space.noun}s could not be "
        "modelled, and only the other candidates were weighed"
    )
