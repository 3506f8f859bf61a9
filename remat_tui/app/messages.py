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


@dataclass
class LoadFailed(Message):
    message: str


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
