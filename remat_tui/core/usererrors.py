"""Provides tracebacks trimmed to the user's own frames.

When a target file raises, the user wants their frames (their file, their line),
not importlib's or remat-tui's. Frames from this package, importlib and jax are
dropped; what remains is formatted the way Python does.
"""

from __future__ import annotations

import os
import sysconfig
import traceback

import remat_tui

_PACKAGE_DIR = os.path.dirname(os.path.abspath(remat_tui.__file__))
_STDLIB = os.path.join(sysconfig.get_paths()["stdlib"], "")
_HIDDEN = (
    _STDLIB,
    _PACKAGE_DIR + os.sep,
    "<frozen importlib",
    os.sep + "importlib" + os.sep,
    os.sep + "jax" + os.sep,
    os.sep + "jaxlib" + os.sep,
)


def _is_user_frame(filename: str) -> bool:
    return not any(part in filename for part in _HIDDEN)


def user_traceback(exc: BaseException) -> str:
    """The exception as Python prints it, keeping only the user's frames."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _is_user_frame(f.filename)]
    lines = traceback.format_list(frames)
    head = "Traceback (most recent call last):\n" if lines else ""
    tail = "".join(traceback.format_exception_only(type(exc), exc))
    return head + "".join(lines) + tail


def describe(exc: BaseException) -> str:
    """One line: `ExcType: message` (first line of the message only)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
