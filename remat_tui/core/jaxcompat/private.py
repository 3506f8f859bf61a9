"""Provides the modules of `jax._src` remat-tui reads, imported here and
nowhere else: the rest of jaxcompat takes them from this module, so the
private modules a JAX release must still have are listed in one place."""

from __future__ import annotations

from types import ModuleType

from jax._src import ad_checkpoint, api_util, source_info_util
from jax._src import core as core

# The logger of the module that runs host callbacks: JAX logs a callback's
# exception on it, with its traceback, before raising it to the caller.
CALLBACK_LOGGER = "jax._src.callback"


def dispatch() -> ModuleType:
    """JAX's dispatch module (its runtime effect tokens), imported on first use."""
    from jax._src import dispatch as module

    return module


def shard_map() -> ModuleType:
    """JAX's shard_map module (the context it traces a body in), imported on first use."""
    from jax._src import shard_map as module

    return module


def config() -> ModuleType:
    """JAX's config module (its `_check_vma` state), imported on first use."""
    from jax._src import config as module

    return module


def hardware_utils() -> ModuleType:
    """JAX's TPU chip probe, imported on first use (only when libtpu is installed)."""
    from jax._src import hardware_utils as module

    return module


__all__ = [
    "CALLBACK_LOGGER",
    "ad_checkpoint",
    "api_util",
    "config",
    "core",
    "dispatch",
    "hardware_utils",
    "shard_map",
    "source_info_util",
]
