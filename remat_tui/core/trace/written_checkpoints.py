"""Provides the `jax.checkpoint` calls as the user's file writes them, read
from its source: what a site's snippet names, and where a checkpoint
applied outside any traced frame sits.

Two cases the traced program cannot answer alone:

- a checkpoint applied once, at module level (`f3 = jax.checkpoint(f, ...)`,
  the seed notebook's f3): when the target runs, no frame of the user's
  holds that line, so the site has no source; the file's only
  `jax.checkpoint` of that function is it (`module_checkpoint`);
- a checkpoint of a wrapped function (`jax.checkpoint(sharded)`, where
  `sharded = jax.shard_map(block, ...)` keeps `block`'s name): the snippet
  must name what the line checkpoints, `sharded`, not `block`
  (`checkpointed_at`).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from functools import lru_cache

from remat_tui.core.model import Source

# How a file may call JAX's checkpoint: jax.checkpoint, jax.remat, and the
# names `from jax import checkpoint` / `from jax.ad_checkpoint import checkpoint` give.
_CALLS = ("jax.checkpoint", "jax.remat", "checkpoint", "remat", "jax.ad_checkpoint.checkpoint")


@dataclass(frozen=True)
class _Written:
    line: int
    column: int
    wrapped: str  # the first argument, as written
    wrapped_name: str | None  # its last name: `f` of `f`, `step` of `self.step`


def checkpointed_at(source: Source | None) -> str | None:
    """What the `jax.checkpoint` call at `source`'s line checkpoints, as
    written (`sharded`), or None where that line has no such call."""
    if source is None:
        return None
    calls = [c for c in _calls(source.file, mtime(source.file)) if c.line == source.line]
    if not calls:
        return None
    return min(calls, key=lambda c: abs(c.column - source.column)).wrapped


def module_checkpoint(path: str | None, function: str) -> Source | None:
    """The line of the file's only `jax.checkpoint` of `function`, or None
    where it has none or several."""
    if path is None:
        return None
    found = [c for c in _calls(path, mtime(path)) if c.wrapped_name == function]
    if len(found) != 1:
        return None
    return Source(path, found[0].line, found[0].column, "<module>")


def mtime(path: str) -> float | None:
    """A file's modification time (None where it cannot be read): the key
    that makes an edited file read again."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


@lru_cache(maxsize=32)
def _calls(path: str, mtime: float | None) -> tuple[_Written, ...]:
    """The file's jax.checkpoint calls; () where it cannot be read. Keyed on
    the modification time, so an edited file is read again."""
    if mtime is None:
        return ()
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        tree = ast.parse(text)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return ()
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        if ast.unparse(node.func) not in _CALLS:
            continue
        first = node.args[0]
        written = ast.get_source_segment(text, first) or ast.unparse(first)
        name = first.id if isinstance(first, ast.Name) else (
            first.attr if isinstance(first, ast.Attribute) else None)  # fmt: skip
        out.append(_Written(node.lineno, node.col_offset + 1, written, name))
    return tuple(out)
