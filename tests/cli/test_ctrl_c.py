"""Ctrl-C in the commands that search (suggest, fit, compare), as the
command line handles it: what is written, what is said, the exit status.

The first Ctrl-C sets the command's stop; here it is set before the search
begins (`stopped_at_once`), as when the user presses it before the first
answer, and the command runs in this process (remat_tui.cli.main)."""

import contextlib

import pytest
from conftest import example

from remat_tui import cli, cli_fit, cli_suggest

MLP = example("mlp.py")


@pytest.fixture
def stopped_at_once(monkeypatch):
    """Ctrl-C before anything is found: the search's stop is set as it starts."""

    @contextlib.contextmanager
    def stopped(stop):
        stop.set()
        yield

    monkeypatch.setattr(cli_fit, "first_interrupt_stops", stopped)
    monkeypatch.setattr(cli_suggest, "first_interrupt_stops", stopped)


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
