"""Facts stated once (issue 44's "one home per fact"): each has one home in the
core, and every other place reads it from there, so changing the home changes
them all."""

from __future__ import annotations

import ast
import inspect
import pathlib
import sys
from dataclasses import dataclass, fields

import pytest
from exact_oracle import hand_peak_and_counts

import remat_tui
from remat_tui.cli.commands import parser as headless_parser
from remat_tui.core.setup.config import RUNS, Config
from remat_tui.core.setup.devices import (
    describe_device,
    device_label,
    libtpu_installed,
    resolve_device,
    topology_of,
)
from remat_tui.core.setup.labels import device_label_from
from remat_tui.core.xla.compile.host_memory import stays_on_device
from remat_tui.report.compiled import device_name

PACKAGE = pathlib.Path(remat_tui.__file__).parent
HOME_OF_RUNS = PACKAGE / "core" / "setup" / "config.py"
# Runs of another thing: the CPU calibration's kernels (its own counts, not a step's).
OTHER_RUNS = {"cpu_rates.py"}


def _literal_int(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _runs_written_out(tree: ast.AST) -> list[int]:
    """Lines giving a runs count as a literal: a `runs` parameter's default, a
    `--runs` option's default, a `...RUNS = 5`, a `getattr(opts, "runs", 5)`."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arguments):
            named = node.posonlyargs + node.args
            for arg, default in zip(
                named[len(named) - len(node.defaults) :], node.defaults, strict=True
            ):
                if arg.arg == "runs" and _literal_int(default):
                    lines.append(default.lineno)
            for arg, kw_default in zip(node.kwonlyargs, node.kw_defaults, strict=True):
                if arg.arg == "runs" and _literal_int(kw_default):
                    lines.append(arg.lineno)
        elif isinstance(node, ast.Call):
            args = [a.value for a in node.args if isinstance(a, ast.Constant)]
            if "--runs" in args:
                lines += [
                    k.value.lineno
                    for k in node.keywords
                    if k.arg == "default" and _literal_int(k.value)
                ]
            if isinstance(node.func, ast.Name) and node.func.id == "getattr" and "runs" in args:
                lines += [a.lineno for a in node.args[2:] if _literal_int(a)]
        elif isinstance(node, ast.Assign) and _literal_int(node.value):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if any(n.endswith("RUNS") for n in names):
                lines.append(node.lineno)
    return lines


def test_the_runs_default_is_stated_once():
    written = {
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in PACKAGE.rglob("*.py")
        if path.name not in OTHER_RUNS
        for line in _runs_written_out(ast.parse(path.read_text()))
    }
    home = f"{HOME_OF_RUNS.relative_to(PACKAGE)}:"
    assert [w for w in written if w.startswith(home)], "config.RUNS is the home"
    assert {w for w in written if not w.startswith(home)} == set()


def test_every_runs_default_is_the_home(capsys):
    for entry in (remat_tui.analyze, remat_tui.compare, remat_tui.suggest, remat_tui.fit):
        assert inspect.signature(entry).parameters["runs"].default == RUNS, entry.__name__
    assert headless_parser().parse_args(["compare", "model.py"]).runs == RUNS
    with pytest.raises(SystemExit):
        headless_parser().parse_args(["compare", "--help"])
    assert f"(default {RUNS})" in " ".join(capsys.readouterr().out.split())


@dataclass(frozen=True)
class _Gpu:
    """A device of a platform this machine lacks, as far as a label reads one."""

    id: int
    platform: str = "gpu"
    device_kind: str = "NVIDIA H100"


def _every_label(d, typed: str) -> set[str]:
    """What each place that names a device calls `d` (typed as `typed`):
    devices.py, a report (from the analysis' description of it), a Config and
    the offload note."""
    labels = {device_name(describe_device(d))}
    if isinstance(d, _Gpu):  # not a jax.Device: only the spelling itself can label it
        return labels | {device_label_from(d.platform, d.id, topology_of(d))}
    note = stays_on_device(1, typed)
    labels |= {device_label(d), device_label(typed), Config.make(device=typed).device}
    return labels | {
        Config.make(device=d).device,
        note[note.index(" on ") + 4 : note.index(": XLA")],
    }


@pytest.mark.parametrize(
    "which, expected",
    [
        ("cpu:0", "cpu:0"),
        ("cpu:3", "cpu:3"),
        ("gpu:0", "gpu:0"),
        ("gpu:2", "gpu:2"),
        ("tpu:v5e:2x2", "tpu:v5e:2x2"),
        ("tpu:v5e:2x2#2", "tpu:v5e:2x2#2"),
    ],
)
def test_every_home_of_a_device_label_agrees(which, expected):
    if which.startswith("gpu"):
        d = _Gpu(int(which[-1]))
    elif which.startswith("tpu"):
        if not libtpu_installed():
            pytest.skip("needs libtpu for a deviceless TPU topology")
        d = resolve_device(which)
    else:
        d = resolve_device(which)
    assert _every_label(d, which) == {expected}


SCALES = """
import jax, jax.numpy as jnp, remat_tui

@remat_tui.target(args=lambda batch=4: (jax.ShapeDtypeStruct((16, 16), jnp.float32),
                                        jax.ShapeDtypeStruct((batch, 16), jnp.float32)))
def f(w, x):
    return jnp.mean(jnp.tanh(x @ w) ** 2)
"""


def test_a_search_resolves_what_it_is_asked_once(write_target, monkeypatch):
    """compare, suggest and fit (fit --optimize's suggest at every batch among
    them) make the search's base configuration once, from what was asked."""
    target = remat_tui.load_targets(write_target(SCALES))["f"]
    made: list[str] = []
    make = Config.make.__func__  # type: ignore[attr-defined]

    def counted(cls, *args, **kwargs):
        caller = sys._getframe(1).f_globals["__name__"]
        if caller.startswith("remat_tui.core.search"):
            made.append(caller)
        return make(cls, *args, **kwargs)

    monkeypatch.setattr(Config, "make", classmethod(counted))
    budget = hand_peak_and_counts(target.fn, target.args(3))[0]  # batch 3 fits, 4 does not
    remat_tui.compare(target, policies=["nothing_saveable"])
    remat_tui.suggest(target, budget)
    assert len(made) == 2
    fitted = remat_tui.fit(target, budget, optimize=True, sites={})
    assert len(fitted.rows) > 1  # searched at several batches
    assert len(made) == 3, made


def test_one_entry_point_compiles_a_configuration():
    """`compile_answer` compiles (and caches) a configuration's step; its
    `.result` is XLA's numbers. `compile_step` is its uncached twin that keeps
    the executable, for measuring. No third name says the same."""
    from remat_tui.core.xla.compile import costs as compiled

    entries = {
        name
        for name, value in vars(compiled).items()
        if name.startswith("compile")
        and inspect.isfunction(value)
        and value.__module__ == compiled.__name__
    }
    assert entries == {"compile_answer", "compile_step"}


def test_the_exact_search_calls_what_its_check_assumed_so():
    """The self-check's words are what it assumed, not an error."""
    from remat_tui.core.search.exact.search import NameOutcome

    assert {f.name for f in fields(NameOutcome)} >= {"assumed"}
    assert "error" not in {f.name for f in fields(NameOutcome)}


SEARCH = PACKAGE / "core" / "search"
HOME_OF_ROWS = SEARCH / "suggest" / "evaluator.py"
# What changes a row in place: each called by the evaluator alone.
ROW_CHANGERS = {"judge_offloads", "compile_row", "peak_notes", "mark_pareto"}


def _row_changes(tree: ast.AST, row_fields: set[str]) -> list[str]:
    """Where a module assigns a Row's field on anything but itself, appends to
    a row's notes, or calls what changes rows in place."""
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            for leaf in ast.walk(t):
                on_self = isinstance(leaf, ast.Attribute) and ast.unparse(leaf.value) == "self"
                if isinstance(leaf, ast.Attribute) and leaf.attr in row_fields and not on_self:
                    found.append(f"{ast.unparse(leaf)} = (line {node.lineno})")
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ROW_CHANGERS:
                found.append(f"{name}(...) (line {node.lineno})")
            if name == "append" and isinstance(func, ast.Attribute):
                owner = func.value
                if isinstance(owner, ast.Attribute) and owner.attr == "notes":
                    found.append(f"{ast.unparse(func)}(...) (line {node.lineno})")
    return found


def test_suggest_changes_its_rows_in_one_place():
    """Issue 44: suggest's rows are made and changed by its Evaluator alone;
    the ways of searching (the ordered list, the exact search) and the
    pipeline only read them."""
    from remat_tui.core.search.rows import Row

    row_fields = {f.name for f in fields(Row)}
    where = {}
    for path in [*(SEARCH / "suggest").glob("*.py"), *(SEARCH / "exact").glob("*.py")]:
        changes = _row_changes(ast.parse(path.read_text()), row_fields)
        if changes:
            where[path.relative_to(PACKAGE).as_posix()] = changes
    assert set(where) == {HOME_OF_ROWS.relative_to(PACKAGE).as_posix()}, where
    # the scan sees what it looks for: the evaluator's own changes
    assert any("transpose_flops" in c for c in where[str(HOME_OF_ROWS.relative_to(PACKAGE))])
    assert any("judge_offloads" in c for c in where[str(HOME_OF_ROWS.relative_to(PACKAGE))])


def test_one_test_of_an_answer():
    """Issue 44: whether a row could be suggest's answer is written once
    (`choice.answers`); the exact search, the ordered list and choose ask
    the evaluator's, and no module compares a row's bytes to the budget
    itself."""
    tests = []
    for path in [*(SEARCH / "suggest").glob("*.py"), *(SEARCH / "exact").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and "weighed_bytes" in ast.unparse(node.left):
                if any("budget" in ast.unparse(c) for c in node.comparators):
                    tests.append(f"{path.name}: {ast.unparse(node)}")
    # answers(), and compile_in_order's "compiled over the budget" (what did not fit)
    assert sorted(tests) == [
        "choice.py: row.weighed_bytes <= budget",
        "ordered.py: row.weighed_bytes > budget",
    ], tests
