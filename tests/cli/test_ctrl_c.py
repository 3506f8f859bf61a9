"""Ctrl-C in the commands that search (suggest, fit, compare), as the
command line handles it: what is written, what is said, the exit status
(docs/guide/cli.md's exit table: 130).

The first Ctrl-C of suggest and fit sets the command's stop; here it is set
before the search begins (`stopped_at_once`), as when the user presses it
before the first answer. compare's Ctrl-C is a KeyboardInterrupt, raised
here as a configuration begins. The commands run in this process
(remat_tui.cli.main)."""

import contextlib

import pytest
from conftest import example

import remat_tui
from remat_tui import cli
from remat_tui.cli import interrupts

MLP = example("mlp.py")


@pytest.fixture
def stopped_at_once(monkeypatch):
    """Ctrl-C before anything is found: the search's stop is set as it starts."""

    @contextlib.contextmanager
    def stopped(stop):
        stop.set()
        yield

    monkeypatch.setattr(interrupts, "first_interrupt_stops", stopped)


@pytest.mark.parametrize(
    "command",
    [
        ["suggest", MLP, "--budget", "1KiB"],
        ["suggest", MLP, "--budget", "1KiB", "--compiled"],
        ["fit", MLP, "--budget", "1MiB"],
        ["fit", MLP, "--budget", "1MiB", "--optimize"],
    ],
    ids=" ".join,
)
def test_ctrl_c_before_any_answer_writes_nothing_and_exits_130(
    command, stopped_at_once, tmp_path, capsys
):
    out = tmp_path / "answer.txt"
    assert cli.main([*command, "-o", str(out)]) == 130
    said = capsys.readouterr()
    assert not out.exists(), out.read_text()
    assert "wrote" not in said.err and said.out == ""
    assert "cancelled before any" in said.err
    # to standard output, the same: nothing
    assert cli.main(command) == 130
    assert capsys.readouterr().out == ""


def test_compare_stopped_says_how_many_of_how_many_and_the_time(monkeypatch, capsys):
    """Ctrl-C as the third configuration begins: the two rows made are
    written, the header saying 2 of how many compare makes and the time it
    ran (it said "(2 configurations, 0.0 s)"), exit 130."""
    import json
    import re
    import time

    from remat_tui.cli.progress import Progress

    planned = len(remat_tui.compare(remat_tui.load_targets(MLP)["loss"]).rows)
    real = Progress.__call__

    def interrupted(self, i, total, config, stage=""):
        real(self, i, total, config, stage)
        if i == 2:
            time.sleep(0.3)  # the time it ran, at least this
            raise KeyboardInterrupt

    monkeypatch.setattr(Progress, "__call__", interrupted)
    assert cli.main(["compare", MLP]) == 130
    head = capsys.readouterr().out.splitlines()[0]
    said = re.search(rf"\(2 of {planned} configurations: stopped by Ctrl-C, (\d+\.\d) s\)$", head)
    assert said and float(said[1]) >= 0.3, head
    assert cli.main(["compare", MLP, "--format", "json"]) == 130
    data = json.loads(capsys.readouterr().out)
    assert data["cancelled"] is True and data["planned"] == planned and len(data["rows"]) == 2


def test_suggest_stopped_after_an_answer_writes_it_with_the_gap_and_exits_130(
    monkeypatch, tmp_path, capsys
):
    """Ctrl-C inside the exact search's compiles (here: the stop set at the
    eighth compile, the model's decisions being measured) on a loop of
    unnamed checkpoints: the best answer verified so far is written, said
    to be stopped, exit 130 (it was lost: "cancelled before any answer")."""
    import json

    from conftest import ROOT

    from remat_tui.cli.progress import Progress

    held = {}

    @contextlib.contextmanager
    def stops(stop):
        held["stop"] = stop
        yield

    monkeypatch.setattr(interrupts, "first_interrupt_stops", stops)
    real = Progress.__call__
    compiling = []

    def progress(self, i, total, config, stage=""):
        real(self, i, total, config, stage)
        if stage == "compiling":
            compiling.append(config)
            if len(compiling) >= 8:
                held["stop"].set()

    monkeypatch.setattr(Progress, "__call__", progress)
    out = tmp_path / "answer.json"
    loop = f"{ROOT}/tests/models/unnamed_loops.py:loop"
    command = ["suggest", loop, "--budget", "1GiB", "--compiled", "--format", "json"]
    assert cli.main([*command, "-o", str(out)]) == 130
    answer = json.loads(out.read_text())
    assert answer["cancelled"] and answer["best"]["compiled"]["fits"]
    assert answer["search"]["method"] == "model" and not answer["search"]["proven"]
    assert "the best answer verified so far" in capsys.readouterr().err
