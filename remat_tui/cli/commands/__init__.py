"""Provides the commands, one module each in this folder, found by name and
imported only when that command runs: `remat-tui report ...` imports
`report.py` alone, and `remat-tui --help` none of them.

A command's module is its whole: the parser it adds (`add_parser`), what it
checks before JAX loads (`check`) and what it runs (`run`); cli/headless.py
does the rest alike for every command (loading the target, writing the
report, the exit status). A command that takes no target (cache) has a
`main(argv)` of its own instead. Adding a command is adding its module here.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from types import ModuleType

# The commands that take no target: they parse and run alone (`main(argv)`).
TARGETLESS = ("cache",)


# The order `--help` lists them in: a user's workflow, look then decide then
# keep. A command not named here is listed after these, by name.
WORKFLOW = ("report", "compare", "suggest", "diff", "memory", "fit", "check", "verify")


def _names() -> tuple[str, ...]:
    """The modules of this folder, by name, without importing them."""
    found = {m.name for m in pkgutil.iter_modules(__path__) if not m.ispkg}
    first = [name for name in WORKFLOW if name in found]
    return (*first, *sorted(found - set(first)))


NAMES = _names()
# The commands that analyse a target, run headless (cli/headless.py).
SUBCOMMANDS = tuple(name for name in NAMES if name not in TARGETLESS)


def load(name: str) -> ModuleType:
    """The module of the command `name` (one of `NAMES`), imported now."""
    return importlib.import_module(f"{__name__}.{name}")


def parser(*names: str) -> argparse.ArgumentParser:
    """A parser of the headless commands `names` (default: all of them), a
    subcommand each, each added by its own module."""
    parser = argparse.ArgumentParser(prog="remat-tui")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in names or SUBCOMMANDS:
        load(name).add_parser(commands)
    return parser
