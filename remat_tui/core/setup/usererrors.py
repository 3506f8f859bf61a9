"""Provides tracebacks trimmed to the user's own frames.

When a target file raises, the user wants their frames (their file, their line),
not importlib's or remat-tui's. Frames from this package, importlib and jax are
dropped; what remains is formatted the way Python does.
"""

from __future__ import annotations

import os
import traceback

from remat_tui.core.runtime.usercode import is_users


def user_traceback(exc: BaseException) -> str:
    """The exception as Python prints it, keeping only the user's frames."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if is_users(f.filename)]
    if not frames:  # nothing of the user's: the one-line description says it all
        return ""
    # Not format_exception_only: it appends JAX's notes about frames it filtered,
    # which describe a traceback the user is not shown.
    return (
        "Traceback (most recent call last):\n"
        + "".join(traceback.format_list(frames))
        + describe(exc)
        + "\n"
    )


def describe(exc: BaseException) -> str:
    """One line: `ExcType: message` (first line of the message only); for an
    exception without a message (a bare assert), where it was raised."""
    text = str(exc).strip().splitlines()
    if text:
        return f"{type(exc).__name__}: {text[0]}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames and is_users(frames[-1].filename):
        where = frames[-1]
        return (
            f"{type(exc).__name__} with no message, raised in {where.name} "
            f"({os.path.basename(where.filename)}:{where.lineno})"
        )
    return f"{type(exc).__name__} with no message, raised inside JAX"
