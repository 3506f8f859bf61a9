"""What docs/guide/cli.md says of the command line, run (issue 41, items 16
and 19): every command in --help, --no-cache on every command that
compiles, --policy where the page says, the `compiles:` line after one
compile, and suggest's help naming what it ranks by."""

import os
import re

import pytest
from conftest import ROOT, example

from remat_tui import cli
from remat_tui.cli.commands import SUBCOMMANDS
from remat_tui.cli.commands import parser as headless_parser
from remat_tui.core.xla.compile import costs as compiled

PAGE = open(os.path.join(ROOT, "docs", "guide", "cli.md"), encoding="utf-8").read()
MLP = example("mlp.py")


def helped(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as stop:
        cli.main([*argv, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


def options_of(command: str) -> set[str]:
    """The options `command`'s parser takes and shows in its help."""
    parser = headless_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return {o for a in sub._actions if a.help != "==SUPPRESS==" for o in a.option_strings}


def named(sentence: str) -> set[str]:
    """The commands a sentence of the page names: `report`, `memory`, ..."""
    return set(re.findall(r"`(" + "|".join((*SUBCOMMANDS, "cache")) + r")`", sentence))


def test_help_lists_every_command_the_page_lists(capsys):
    listed = set(re.findall(r"^\| `remat-tui (\w+)` \|", PAGE, re.M))
    assert listed == {*SUBCOMMANDS, "cache"}
    top = helped(capsys)
    for command in listed:
        assert command in top, command
        assert f"usage: remat-tui {command}" in helped(capsys, command)


def test_every_command_that_compiles_takes_no_cache(capsys, store_on):
    sentence = re.search(r"Every command that compiles \(([^)]*)\)", PAGE)[1]
    compiling = named(sentence)
    assert compiling == {"report", "memory", "compare", "suggest", "fit", "check", "verify"}
    for command in compiling:
        assert "--no-cache" in options_of(command), command
    # check, run: the cache neither read nor written.
    baseline = store_on.parent / "baseline.json"
    assert cli.main(["check", MLP, "--write", str(baseline), "--no-cache"]) == 0
    compiled.clear_cache()  # a new process: nothing known but the store
    assert cli.main(["check", MLP, "--against", str(baseline), "--no-cache"]) == 0
    err = capsys.readouterr().err
    assert err.count("remat-tui: compiles: 1 program compiled\n") == 2, err
    assert not os.path.exists(store_on / "remat-tui" / "compiles")


def test_policy_is_taken_where_the_page_says(capsys):
    bullet = re.search(r"^- `--policy SPEC`:(.*?)(?=^- )", PAGE, re.M | re.S)[1]
    takes, refuses = bullet.split("`suggest` searches")
    assert named(takes) == {c for c in SUBCOMMANDS if "--policy" in options_of(c)}
    assert "naming `compare --policy`" in " ".join(refuses.split())
    status = cli.main(["suggest", MLP, "--budget", "1MiB", "--policy", "dots_saveable"])
    err = capsys.readouterr().err
    assert status == 2 and "compare --policy dots_saveable" in err and "Traceback" not in err


def test_one_program_compiled_is_said(capsys):
    assert "`remat-tui: compiles: 1 program compiled`" in PAGE
    assert cli.main(["report", MLP, "--compiled"]) == 0
    assert "remat-tui: compiles: 1 program compiled\n" in capsys.readouterr().err


def test_suggests_help_says_what_it_ranks_by(capsys):
    text = " ".join(helped(capsys, "suggest").split())
    assert "recomputation" not in text and "least recompute" not in text
    assert "the estimated step time once compiled (the measured one with --measure)" in text
    assert "else the recompute FLOPs" in text
