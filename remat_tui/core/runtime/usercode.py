"""Provides the one answer to "is this file the user's code?": a file outside
the interpreter's standard library, its installed packages (JAX, Flax,
Equinox, optax, ...) and remat-tui itself. Tracebacks are trimmed to the
user's frames, a residual's line is the user's, and a reload re-imports the
user's own modules by it."""

from __future__ import annotations

import os
import site
import sysconfig

# remat_tui/: two folders up from this file's (core/runtime/).
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths["purelib"], paths["platlib"], paths["stdlib"], paths["platstdlib"], PACKAGE_DIR}
    roots.update(site.getsitepackages())  # a distribution's own dist-packages too
    roots.add(site.getusersitepackages())
    found = set()
    for root in roots:
        if root:
            found.add(os.path.join(root, ""))
            found.add(os.path.join(os.path.realpath(root), ""))
    return tuple(sorted(found))


# Folders whose files are never the user's, as given and with links resolved.
NOT_USERS = _roots()
# Files that are no one's on disk (the import machinery's frozen modules), and
# JAX's own wherever it is installed from (a source checkout too).
_NEVER = ("<frozen ", os.sep + os.path.join("jax", "_src", ""), os.sep + os.path.join("jaxlib", ""))
# Installed packages only: where a library's wrapper around the user's code lives.
LIBRARY_ROOTS = tuple(
    {os.path.join(p, "") for p in (sysconfig.get_path("purelib"), sysconfig.get_path("platlib"))}
)


def is_users(path: str) -> bool:
    """Whether the file at `path` is the user's own code."""
    return not path.startswith(NOT_USERS) and not any(part in path for part in _NEVER)


def in_library(path: str) -> bool:
    """Whether `path` is an installed package's file (a library's, not the user's)."""
    return path.startswith(LIBRARY_ROOTS)
