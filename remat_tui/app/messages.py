"""Provides the messages posted to the App: by workers, with what they found
(workers never touch widgets), and by the main screen, its lists and the
palette, with what the user asks for (screens read no App state; the App
decides)."""

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
    """Watched files were saved (app/controllers/reload.py)."""

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


# ---- what a screen or the palette asks the App for (messages up) -----------------------


@dataclass
class PolicyWanted(Message):
    """Analyse under `spec` as the outer policy; `listed`: keep it in the
    Policies list (a spec typed in the palette)."""

    spec: Any  # a PolicySpec, parsed where it was typed
    listed: bool = False


@dataclass
class SiteWanted(Message):
    """Set a checkpoint site's policy (`site`: an id or a function name; `spec`:
    a PolicySpec, or None for the policy in the code)."""

    site: int | str
    spec: Any


@dataclass
class NameCycled(Message):
    """Cycle a checkpoint_name recompute → save → offload where toggles apply."""

    name: str


@dataclass
class TargetWanted(Message):
    """Open another target of the file (the target picker, the palette)."""

    name: str


@dataclass
class ErrorShown(Message):
    """Say `message` above the panes (a spec typed in the palette that does not parse)."""

    message: str


class ScreenReady(Message):
    """The main screen's widgets are all mounted: loading may draw into them."""
