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

import sys

from remat_tui.errors import RematError


def main(argv: list[str] | None = None) -> int:
    from remat_tui.cli import commands

    argv = sys.argv[1:] if argv is None else list(argv)
    try:
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
