"""Facts stated once (issue 44's "one home per fact"): each has one home in the
core, and every other place reads it from there, so changing the home changes
them all."""

from __future__ import annotations

import ast
import inspect
import pathlib

import pytest

import remat_tui
from remat_tui.cli_parser import headless_parser
from remat_tui.core.setup.config import RUNS

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
