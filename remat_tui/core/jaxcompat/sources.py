"""Provides the user's own line behind an equation, read from the traceback
JAX records on it (`source_info`), and JAX's own one-line summary of it."""

from __future__ import annotations

import os

import jax
import jaxlib
from jax.extend import source_info_util as public_siu

from remat_tui.core.jaxcompat.private import source_info_util as _siu
from remat_tui.core.model import Source
from remat_tui.core.usercode import in_library, is_users

# Our own frames must never be taken for the user's: JAX attributes each
# equation to the innermost frame outside its exclusions.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
public_siu.register_exclusion(_PACKAGE)  # remat_tui/, three folders up
# JAX's files and our own: never the code that calls JAX.
_NOT_CALLERS = tuple(
    os.path.join(os.path.realpath(os.path.dirname(module.__file__)), "") for module in (jax, jaxlib)
) + (os.path.join(_PACKAGE, ""),)


def summarize(source_info) -> str:
    """JAX's own one-line 'file:line:col (function)' for an equation."""
    return public_siu.summarize(source_info)


def user_source(source_info) -> Source | None:
    """The user's line behind an equation (its innermost non-JAX frame), or None."""
    frame = _siu.user_frame(source_info.traceback)
    return _frame_source(frame) if frame is not None else None


def calling_file(source_info) -> str | None:
    """The file of the innermost frame outside JAX and remat-tui behind an
    equation: for a checkpoint, the code that called `jax.checkpoint`, a
    library's wrapper included (JAX's own user frame skips the files a
    library registers with it, as Flax does its lifted transforms)."""
    if source_info.traceback is None:
        return None
    for frame in source_info.traceback.frames:
        path = frame.file_name
        if not (path.startswith(_NOT_CALLERS) or os.path.realpath(path).startswith(_NOT_CALLERS)):
            return path
    return None


def own_frames(source_info) -> list:
    """The frames outside JAX and installed libraries, innermost first."""
    return [f for f in _siu.user_frames(source_info.traceback) if not in_library(f.file_name)]


def users_frames(source_info) -> tuple[Source, ...]:
    """Every frame of the user's own code behind an equation (outside JAX,
    the standard library and installed packages), innermost first: the
    line, and the calls that led to it. XLA's instruction metadata keeps the
    same frames (core/xla/made.py reads them there)."""
    if source_info.traceback is None:
        return ()
    return tuple(
        _frame_source(f) for f in _siu.user_frames(source_info.traceback) if is_users(f.file_name)
    )


def own_source(source_info, prefer_dir: str | None = None, fallback: bool = True):
    """The user's own line: the innermost frame outside JAX and outside installed
    libraries, preferring one under `prefer_dir` (the target file's folder, so
    its local modules count as the user's too). With no such frame, JAX's own
    user frame, or None when `fallback` is off."""
    frames = own_frames(source_info)
    chosen = next((f for f in frames if prefer_dir and f.file_name.startswith(prefer_dir)), None)
    if chosen is None and frames:
        chosen = frames[0]
    if chosen is not None:
        return _frame_source(chosen)
    return user_source(source_info) if fallback else None


def frames_key(source_info):
    """A hashable key of the frames behind an equation (their code and
    position), or None. Equal for the equations of one body traced twice, and
    for an equation JAX copies out of a body (a checkpoint's forward part
    evaluated in place, a scan's loop invariants hoisted): those keep the
    body's frames, which start where the body does."""
    traceback = source_info.traceback
    if traceback is None:
        return None
    codes, lastis = traceback.raw_frames()
    return tuple(zip(codes, lastis, strict=True))


def own_function_names(source_info) -> list[str]:
    """The functions of the user's own frames behind an equation, innermost first."""
    return [f.function_name for f in own_frames(source_info)]


def outermost_own_function(jaxpr) -> str | None:
    """The function a traced body starts in: the outermost frame of the user's
    own code behind its first equation that has one (a library's wrapper, such
    as Flax's or Equinox's around a checkpointed block, is skipped)."""
    for eqn in jaxpr.eqns:
        frames = own_frames(eqn.source_info)
        if frames:
            return frames[-1].function_name
    return None


def _frame_source(frame) -> Source:
    return Source(frame.file_name, frame.start_line, frame.start_column, frame.function_name)
