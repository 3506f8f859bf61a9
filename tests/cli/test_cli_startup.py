"""The command line starts fast (issue 44, item 4): `remat-tui --help` and
`remat-tui COMMAND --help` import no JAX and no Textual, and the commands'
registry imports the module of the command asked for alone (none for the
app's --help). Each run is a fresh interpreter, as a user's is."""

import json
import os
import subprocess
import sys

import pytest

from remat_tui.cli import commands

LOADED_AFTER = """
import json, sys
from remat_tui.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def loaded_after(*argv: str) -> set[str]:
    """The modules a fresh interpreter holds after `remat-tui ARGV`."""
    out = subprocess.run(
        [sys.executable, "-c", LOADED_AFTER, *argv],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def commands_loaded(loaded: set[str]) -> set[str]:
    prefix = f"{commands.__name__}."
    return {m.removeprefix(prefix) for m in loaded if m.startswith(prefix)}


def test_the_apps_help_imports_no_jax_and_no_command():
    loaded = loaded_after("--help")
    assert "jax" not in loaded and "textual" not in loaded
    assert commands_loaded(loaded) == set()


@pytest.mark.parametrize("command", commands.NAMES)
def test_a_commands_help_imports_no_jax_and_that_command_alone(command):
    loaded = loaded_after(command, "--help")
    assert "jax" not in loaded and "textual" not in loaded
    assert commands_loaded(loaded) == {command}


def test_every_module_in_commands_is_a_command():
    """The registry is the folder: each module adds its own parser, checks
    and runs (or, taking no target, has a main of its own)."""
    folder = os.path.dirname(commands.__file__)
    names = {f[:-3] for f in os.listdir(folder) if f.endswith(".py") and f != "__init__.py"}
    assert set(commands.NAMES) == names
    assert set(commands.SUBCOMMANDS) == names - set(commands.TARGETLESS)
    for name in commands.SUBCOMMANDS:
        module = commands.load(name)
        assert callable(module.add_parser) and callable(module.check) and callable(module.run)
    for name in commands.TARGETLESS:
        assert callable(commands.load(name).main)


def test_the_app_without_a_terminal_says_so_and_exits_2():
    """`remat-tui FILE` piped (no terminal to draw on) is one line and exit 2,
    before JAX loads, where it spun at full CPU with nothing drawn."""
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "mlp.py")
    env = {k: v for k, v in os.environ.items() if k != "TEXTUAL_DRIVER"}
    run = subprocess.run(
        [sys.executable, "-m", "remat_tui", example],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "the app needs a terminal" in run.stderr and "remat-tui report" in run.stderr
    assert "Traceback" not in run.stderr


def test_help_lists_the_commands_in_a_users_order():
    assert commands.NAMES[: len(commands.WORKFLOW)] == commands.WORKFLOW
    assert set(commands.NAMES) - set(commands.WORKFLOW) == set(commands.TARGETLESS)
