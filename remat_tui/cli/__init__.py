"""Provides the command line, `main`: `remat-tui FILE[:NAME]` starts the app
(cli/app.py); `remat-tui COMMAND ...` runs one command, its module in
commands/ (report, compare, suggest, diff, memory, fit, check, verify run
headless through cli/headless.py; cache alone).

Bad input is one line naming the cause and the fix, exit status 2; Ctrl-C,
130. This package imports only the standard library at module level and
each command's module only when that command runs, so `--help` is instant:
jax loads when a target is analysed and textual only when the app starts.
"""

from __future__ import annotations

import os
import re
import sys

from remat_tui.errors import RematError


def main(argv: list[str] | None = None) -> int:
    from remat_tui.cli import commands

    argv = _negative_values_joined(sys.argv[1:] if argv is None else list(argv))
    try:
        if argv and argv[0] not in commands.NAMES:
            _not_a_command(argv[0], commands.NAMES)
        if argv and argv[0] in commands.TARGETLESS:
            return int(commands.load(argv[0]).main(argv[1:]))
        if argv and argv[0] in commands.SUBCOMMANDS:
            from remat_tui.cli import headless

            return headless.run(argv)
        from remat_tui.cli import app

        return app.run(app.parser().parse_args(argv))
    except RematError as exc:
        print(f"remat-tui: error: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _not_a_command(word: str, names: tuple[str, ...]) -> None:
    """A first word that is no command and cannot be a file (no dot, no
    slash, nothing there by that name) is a mistyped command: said so, with
    the nearest command, rather than argparse's "unrecognized arguments"."""
    looks_like_a_path = "." in word or "/" in word or os.path.exists(word.split(":")[0])
    if word.startswith("-") or looks_like_a_path:
        return
    import difflib

    near = difflib.get_close_matches(word, names, n=1)
    hint = f"Did you mean `remat-tui {near[0]}`? " if near else ""
    raise RematError(
        f"{word!r} is not a command, nor a file. {hint}The commands are "
        f"{', '.join(names)}; the app takes a Python file (remat-tui FILE)."
    )


def _negative_values_joined(argv: list[str]) -> list[str]:
    """`--budget -5MiB` as `--budget=-5MiB`: argparse reads a value that starts
    with a dash as an option and says "expected one argument"; joined, the
    option's own check says what is wrong with the value."""
    out: list[str] = []
    for word in argv:
        if out and out[-1].startswith("--") and "=" not in out[-1] and _NEGATIVE.fullmatch(word):
            out[-1] = f"{out[-1]}={word}"
        else:
            out.append(word)
    return out


_NEGATIVE = re.compile(r"-[0-9.][0-9A-Za-z.+-]*")
