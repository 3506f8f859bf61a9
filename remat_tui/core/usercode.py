"""Provides what counts as a library's code rather than the user's: files of
installed packages (Flax, Equinox, optax, ...), where JAX's own idea of the
user's frame often lands and hides the user's line."""

from __future__ import annotations

import os
import sysconfig

LIBRARY_ROOTS = tuple(
    {os.path.join(p, "") for p in (sysconfig.get_path("purelib"), sysconfig.get_path("platlib"))}
)


def in_library(path: str) -> bool:
    return path.startswith(LIBRARY_ROOTS)
