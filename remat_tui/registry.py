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
    # What it trains (Contract 8): positions in `args` that are parameters, and
    # the optax optimizer updating them; then the compiled measure is the step.
    param_positions: tuple[int, ...] | None = None
    optimizer: Any = None

    @property
    def label(self) -> str:
        """`file:name`, how the CLI and reports refer to the target."""
        return f"{self.file}:{self.name}" if self.file else self.name


def target(
    args: Any = (),
    kwargs: Any = None,
    name: str | None = None,
    policies: dict[str, Callable] | None = None,
    params: tuple[int, ...] | int | None = None,
    optimizer: Any = None,
) -> Callable[[Callable], Callable]:
    """Register the decorated callable as a target; returns it unchanged.

    `args` is a tuple or a zero-argument callable returning one; `kwargs` a dict
    or a callable returning one. `policies` maps extra policy names to policy
    callables, which the target can then be analysed under by name.

    `params` (positions in `args`) and `optimizer` (an optax transformation)
    say what the function trains: the compiled figure is then one training
    step (the gradient, the optimizer's update, parameters and optimizer state
    donated), not the gradient alone.
    """
    if (params is None) != (optimizer is None):
        raise TypeError(
            "remat_tui.target: params and optimizer go together: params=(0,) names the "
            "arguments that are parameters, optimizer=optax.adam(1e-3) what updates them"
        )
    positions = (params,) if isinstance(params, int) else params

    def register(fn: Callable) -> Callable:
        target_name = name or getattr(fn, "__name__", None)
        if not target_name or target_name == "<lambda>":
            raise TypeError(
                "remat_tui.target: this callable has no usable __name__; pass name='...'"
            )
        if _collector is not None:
            _collector.append(
                Target(
                    fn=fn,
                    name=target_name,
                    args=args,
                    kwargs=kwargs,
                    policies=dict(policies or {}),
                    param_positions=tuple(positions) if positions is not None else None,
                    optimizer=optimizer,
                )
            )
        return fn

    return register
