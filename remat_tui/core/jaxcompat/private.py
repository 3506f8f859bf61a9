"""Provides the modules of `jax._src` remat-tui reads, imported here and
nowhere else: the rest of jaxcompat takes them from this module, so the
private modules a JAX release must still have are listed in one place."""

from __future__ import annotations

from jax._src import ad_checkpoint, api_util, source_info_util
from jax._src import core as core


def dispatch():
    """JAX's dispatch module (its runtime effect tokens), imported on first use."""
    from jax._src import dispatch as module

    return module


def hardware_utils():
    """JAX's TPU chip probe, imported on first use (only when libtpu is installed)."""
    from jax._src import hardware_utils as module

    return module


__all__ = ["ad_checkpoint", "api_util", "core", "dispatch", "hardware_utils", "source_info_util"]
