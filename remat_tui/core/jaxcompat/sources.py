"""Provides the user's own line behind an equation, read from the traceback
JAX records on it (`source_info`), and JAX's own one-line summary of it."""

from __future__ import annotations

import os
from collections.abc import Callable
from types import CodeType
from typing import Any, TypeVar

import jax
import jaxlib
from jax.extend import source_info_util as public_siu

from remat_tui.core.jaxcompat.objects import Jaxpr
from remat_tui.core.jaxcompat.private import source_info_util as _siu
from remat_tui.core.places import Source
from remat_tui.core.runtime.usercode import in_library, is_users

# Our own frames must never be taken for the user's: JAX attributes each
# equation to the innermost frame outside its exclusions.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
public_siu.register_exclusion(_PACKAGE)  # remat_tui/, three folders up
# JAX's files and our own: never the code that calls JAX.
_NOT_CALLERS = tuple(
    # a package's __init__ always has a __file__; the `or` is for the checker
    os.path.join(os.path.realpath(os.path.dirname(module.__file__ or "")), "")
    for module in (jax, jaxlib)
) + (os.path.join(_PACKAGE, ""),)


# Every equation records its whole stack, and equations share stacks: JAX's
# tracebacks compare and hash by their frames, and the layers of an unrolled
# loop, say, record equal ones. So each answer below is worked out once per
# traceback, and each frame's Source once per (code, instruction): an
# analysis asks for the user's line of thousands of equations. The tables
# are bounded (cleared past _KEPT entries), and cleared when a library
# registers files with JAX as not the user's (Flax does on import): what
# JAX takes for the user's frame changes then.
_KEPT = 65536
_answers: dict[tuple, Any] = {}  # (question, traceback, its arguments) -> answer
_sources: dict[tuple, Source] = {}  # (code, instruction) -> its Source
_own_files: dict[str, bool] = {}  # path -> own_frames keeps its frames
_users_files: dict[str, bool] = {}  # path -> users_frames keeps its frames
_registered = [0]  # the files registered with JAX when the tables were filled


def _fresh() -> None:
    """Empties the tables if JAX's exclusions or inclusions changed."""
    registered = len(_siu._exclude_paths) + len(_siu._include_paths)
    if registered != _registered[0]:
        _answers.clear()
        _own_files.clear()
        _users_files.clear()
        _registered[0] = registered


Frames = tuple[tuple[CodeType, int], ...]  # (code, instruction), innermost first
SourceInfo = _siu.SourceInfo
_Answer = TypeVar("_Answer")


def _per_traceback(
    question: str, source_info: SourceInfo, answer: Callable[[Frames], _Answer]
) -> _Answer:
    """`answer(frames)` for the equation's frames ((code, instruction) pairs,
    innermost first), kept per traceback and `question`."""
    traceback = source_info.traceback
    if traceback is None:
        return answer(())
    _fresh()
    key = (question, traceback)
    found = _answers.get(key, _answers)
    if found is _answers:
        if len(_answers) >= _KEPT:
            _answers.clear()
        codes, lastis = traceback.raw_frames()
        found = _answers[key] = answer(tuple(zip(codes, lastis, strict=True)))
    return found


def _source_at(code: CodeType, lasti: int) -> Source:
    key = (code, lasti)
    found = _sources.get(key)
    if found is None:
        if len(_sources) >= _KEPT:
            _sources.clear()
        found = _sources[key] = _frame_source(_siu.raw_frame_to_frame(code, lasti))
    return found


def _own(path: str) -> bool:
    """A file of the user's outside installed libraries."""
    kind = _own_files.get(path)
    if kind is None:
        kind = _own_files[path] = _siu.is_user_filename(path) and not in_library(path)
    return kind


def _users(path: str) -> bool:
    """A file of the user's own code (usercode.is_users)."""
    kind = _users_files.get(path)
    if kind is None:
        kind = _users_files[path] = _siu.is_user_filename(path) and is_users(path)
    return kind


def summarize(source_info: SourceInfo) -> str:
    """JAX's own one-line 'file:line:col (function)' for an equation."""
    return _per_traceback("summarize", source_info, lambda _: public_siu.summarize(source_info))


def user_source(source_info: SourceInfo) -> Source | None:
    """The user's line behind an equation (its innermost non-JAX frame, as
    JAX's own `user_frame` finds it), or None."""
    return _per_traceback("user", source_info, _first_users)


def _first_users(frames: Frames) -> Source | None:
    jax_users = _siu.is_user_filename
    return next((_source_at(c, i) for c, i in frames if jax_users(c.co_filename)), None)


def calling_file(source_info: SourceInfo) -> str | None:
    """The file of the innermost frame outside JAX and remat-tui behind an
    equation: for a checkpoint, the code that called `jax.checkpoint`, a
    library's wrapper included (JAX's own user frame skips the files a
    library registers with it, as Flax does its lifted transforms)."""
    return _per_traceback("calling", source_info, _calling)


def _calling(frames: Frames) -> str | None:
    for code, _ in frames:
        path = code.co_filename
        if not (path.startswith(_NOT_CALLERS) or os.path.realpath(path).startswith(_NOT_CALLERS)):
            return path
    return None


def own_frames(source_info: SourceInfo) -> tuple[Source, ...]:
    """The frames outside JAX and installed libraries, innermost first."""
    return _per_traceback("own", source_info, _own_frames)


def _own_frames(frames: Frames) -> tuple[Source, ...]:
    return tuple(_source_at(c, i) for c, i in frames if _own(c.co_filename))


def users_frames(source_info: SourceInfo) -> tuple[Source, ...]:
    """Every frame of the user's own code behind an equation (outside JAX,
    the standard library and installed packages), innermost first: the
    line, and the calls that led to it. XLA's instruction metadata keeps the
    same frames (`xla.buffers.made` reads them there)."""
    return _per_traceback("users", source_info, _users_frames)


def _users_frames(frames: Frames) -> tuple[Source, ...]:
    return tuple(_source_at(c, i) for c, i in frames if _users(c.co_filename))


def own_source(
    source_info: SourceInfo, prefer_dir: str | None = None, fallback: bool = True
) -> Source | None:
    """The user's own line: the innermost frame outside JAX and outside installed
    libraries, preferring one under `prefer_dir` (the target file's folder, so
    its local modules count as the user's too). With no such frame, JAX's own
    user frame, or None when `fallback` is off."""
    frames = own_frames(source_info)
    if prefer_dir:
        chosen = next((f for f in frames if f.file.startswith(prefer_dir)), None)
        if chosen is not None:
            return chosen
    if frames:
        return frames[0]
    return user_source(source_info) if fallback else None


def frames_key(source_info: SourceInfo) -> Frames | None:
    """A hashable key of the frames behind an equation (their code and
    position), or None. Equal for the equations of one body traced twice, and
    for an equation JAX copies out of a body (a checkpoint's forward part
    evaluated in place, a scan's loop invariants hoisted): those keep the
    body's frames, which start where the body does."""
    if source_info.traceback is None:
        return None
    return _per_traceback("key", source_info, _itself)


def _itself(frames: Frames) -> Frames:
    return frames


def own_function_names(source_info: SourceInfo) -> list[str]:
    """The functions of the user's own frames behind an equation, innermost first."""
    return [f.function for f in own_frames(source_info)]


def outermost_own_function(jaxpr: Jaxpr) -> str | None:
    """The function a traced body starts in: the outermost frame of the user's
    own code behind its first equation that has one (a library's wrapper, such
    as Flax's or Equinox's around a checkpointed block, is skipped)."""
    for eqn in jaxpr.eqns:
        frames = own_frames(eqn.source_info)
        if frames:
            return frames[-1].function
    return None


def _frame_source(frame: _siu.Frame) -> Source:
    return Source(frame.file_name, frame.start_line, frame.start_column, frame.function_name)
