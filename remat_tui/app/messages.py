"""Provides the messages workers post to the app (workers never touch widgets)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass
class TargetsLoaded(Message):
    """JAX is imported and the target file loaded."""

    targets: dict[str, Any]
    devices: list[str]
    device: str  # the requested device, resolved (JAX's default if none was asked for)
    device_error: str | None  # why the requested device could not be used
    watched: tuple[str, ...] = ()  # the target file and the local modules it imported


@dataclass
class LoadFailed(Message):
    message: str
    watched: tuple[str, ...] = ()  # files to watch: saving one of them loads again


@dataclass
class AnalysisReady(Message):
    """An analysis finished. `request` says which request it answers, so a
    result that a newer request superseded is cached but not shown."""

    request: int
    key: tuple
    analysis: Any


@dataclass
class AnalysisFailed(Message):
    request: int
    key: tuple
    message: str


@dataclass
class Progress(Message):
    """A worker began a stage of its work ("importing JAX", "tracing ...").
    `request` is the analysis request it serves (None: loading or reloading).
    A few per analysis, so none replaces another: each stage is shown."""

    what: str
    request: int | None = None


@dataclass
class FilesChanged(Message):
    """Watched files were saved (app/reload.py)."""

    paths: tuple[str, ...]


@dataclass
class Reloaded(Message):
    """The target file was imported again after a save. `generation` says which
    save it answers: a reload that a newer save superseded is dropped."""

    generation: int
    targets: dict[str, Any]
    watched: tuple[str, ...]


@dataclass
class ReloadFailed(Message):
    generation: int
    message: str
    watched: tuple[str, ...] = ()
