"""Provides `remat_tui.target`, the decorator target files use (Contract 1).

Pure Python on purpose: a target file imports `remat_tui` before it imports
jax, and that import must stay instant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# The loader sets this to a fresh list while it imports a target file, so
# registrations land with the file being loaded; outside the loader the
# decorator only returns the callable.
_collector: list[Target] | None = None


@dataclass
class Target:
    """A callable plus the example arguments remat-tui analyses it with."""

    fn: Callable
    name: str
    args: Any = ()
    kwargs: Any = None
    policies: dict[str, Callable] = field(default_factory=dict)
    file: str | None = None

    @property
    def label(self) -> str:
        """`file:name`, how the CLI and reports refer to the target."""
        return f"{self.file}:{self.name}" if self.file else self.name


def target(
    args: Any = (),
    kwargs: Any = None,
    name: str | None = None,
    policies: dict[str, Callable] | None = None,
) -> Callable[[Callable], Callable]:
    """Register the decorated callable as a target; returns it unchanged.

    `args` is a tuple or a zero-argument callable returning one; `kwargs` a dict
    or a callable returning one. `policies` maps extra policy names to policy
    callables, which the target can then be analysed under by name.
    """

    def register(fn: Callable) -> Callable:
        target_name = name or getattr(fn, "__name__", None)
        if not target_name or target_name == "<lambda>":
            raise TypeError(
                "remat_tui.target: this callable has no usable __name__; pass name='...'"
            )
        if _collector is not None:
            _collector.append(
                Target(
                    fn=fn, name=target_name, args=args, kwargs=kwargs, policies=dict(policies or {})
                )
            )
        return fn

    return register
