"""Provides `remat-tui cache [show|clear]`: the compile cache. It takes no
target, so it parses and runs alone (`main`).

Imports only the standard library and light modules at module level.
"""

from __future__ import annotations

import argparse
import sys

from remat_tui.core.units import count


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="remat-tui cache",
        description="The compile cache: what remat-tui read from XLA for each program it "
        "compiled, kept so that the same program is not compiled again "
        "($XDG_CACHE_HOME/remat-tui, else ~/.cache/remat-tui; REMAT_TUI_CACHE_SIZE caps it, "
        "default 256MiB).",
    )
    parser.add_argument(
        "action", nargs="?", choices=("show", "clear"), default="show",
        help="show where it is and what it holds (default), or clear it",
    )  # fmt: skip
    return parser


def main(argv: list[str]) -> int:
    """`remat-tui cache ARGV`."""
    opts = parser().parse_args(argv)  # --help before the store is imported
    from remat_tui.core.xla.compile.store import Store, describe

    store = Store()
    if opts.action == "clear":
        gone = store.clear()
        print(f"remat-tui: cleared the compile cache: {count(gone, 'program')} ({store.folder})")
        return 0
    sys.stdout.write(describe(store.summary()))
    return 0
