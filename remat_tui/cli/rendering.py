"""Provides what a command's `run` gives back (`Rendered`), the format it is
rendered in (`output_format`: --format, else -o's extension) and the exit
status said after it is written when a measured step raised (`failed_runs`).

Imports only the standard library at module level.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

# What a command's run gives back: (the report, its warnings, the exit status
# once it is written). An empty report is no answer (Ctrl-C came before one):
# nothing is written.
Rendered = tuple[str, list[str], Callable[[], int]]

# -o's extension picks the format when --format is not given.
OUTPUT_FORMATS = {".json": "json", ".md": "md", ".markdown": "md", ".html": "html"}
OUTPUT_FORMATS |= {".htm": "html", ".txt": "text"}


def output_format(opts: argparse.Namespace) -> str:
    if opts.format:
        return opts.format
    ext = os.path.splitext(opts.output or "")[1].lower()
    return OUTPUT_FORMATS.get(ext, "text")


def failed_runs(labels: list[str], error: str | None) -> int:
    """Exit status 2, with a message (`error`: the first failed run's), when a
    compiled step raised when run (the report, with every row measured, is
    written first)."""
    if not labels:
        return 0
    first = (error or "").replace("\n", " ")
    print(
        f"remat-tui: error: {len(labels)} configuration(s) raised when run on the device "
        f"({', '.join(labels[:3])}{', ...' if len(labels) > 3 else ''}): {first}. The rows "
        "measured are in the report; fix the step, or drop --measure to rank by the estimate.",
        file=sys.stderr,
    )
    return 2
