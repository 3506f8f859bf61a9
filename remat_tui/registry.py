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
    """A callable plus the example arguments remat-tui analyses it with.

    Made by `@remat_tui.target` (see it for the arguments) and returned by
    `load_targets`; pass one to `analyze`, `compare`, `suggest` or `diff`.

    Attributes:
        fn: the function analysed.
        name: its name in the file (`FILE:NAME`).
        args: the example arguments, or a callable returning them.
        kwargs: the keyword arguments, or a callable returning them; or None.
        policies: the target's own policies, by name.
        file: the file it was loaded from (None for a target made in code).
        param_positions: positions in `args` that are parameters: what the
            compiled step differentiates (and, when it trains, updates).
        optimizer: the optax transformation that updates them, when it trains.
        train_step: a training step of one's own, when it trains.
        opt_state: that step's optimizer state (an example, or a function of
            the parameters returning one).
        mesh: the mesh asked for (`--mesh data=4,model=2`, or `mesh=` in the
            API), as its axes `(("data", 4), ("model", 2))`: made over the
            chosen devices for an args factory's parameter named `mesh`;
            None where none was asked.
        verify_args: the arguments `verify` runs the step with, in place of
            `args` (a tuple of arrays, or a callable returning one); None:
            `args`, with seeded values where it gives shapes only.
    """

    fn: Callable
    name: str
    args: Any = ()
    kwargs: Any = None
    policies: dict[str, Callable] = field(default_factory=dict)
    file: str | None = None
    # What it trains (Contract 8): positions in `args` that are parameters (what
    # the compiled gradient differentiates), and the optax optimizer updating
    # them, or a step of the user's own and its optimizer state; then the
    # compiled measure is the step.
    param_positions: tuple[int, ...] | None = None
    optimizer: Any = None
    train_step: Callable | None = None
    opt_state: Any = None  # the state's example, or a function of the parameters giving it
    mesh: tuple[tuple[str, int], ...] | None = None  # asked for; core/setup/meshes.py
    verify_args: Any = None  # what verify runs the step with, in place of args (Contract 18)

    @property
    def trains(self) -> bool:
        """Whether the compiled measure is a training step, not the gradient alone."""
        return self.optimizer is not None or self.train_step is not None

    @property
    def label(self) -> str:
        """`file:name`, how the CLI and reports refer to the target."""
        return target_label(self.file, self.name)


def target_label(file: str | None, name: str) -> str:
    """`file:name`, or the name alone for a target without a file: the one
    spelling of a target in the CLI, the app and every report."""
    return f"{file}:{name}" if file else name


def target(
    args: Any = (),
    kwargs: Any = None,
    name: str | None = None,
    policies: dict[str, Callable] | None = None,
    params: tuple[int, ...] | int | None = None,
    optimizer: Any = None,
    train_step: Callable | None = None,
    opt_state: Any = None,
    verify_args: Any = None,
) -> Callable[[Callable], Callable]:
    """Register the decorated callable as a target; returns it unchanged.

    ```python
    @remat_tui.target(args=lambda: (jnp.ones((5, 4)), jnp.ones(4)))
    def f(W, x):
        return jnp.sin(W @ x)
    ```

    Args:
        args: the example arguments: a tuple of arrays or
            `jax.ShapeDtypeStruct`s, or a zero-argument callable returning
            one. A callable with a parameter named `devices` is called with
            the chosen device set's devices, to build a sharded mesh. One
            with a parameter named `batch` (its default the example's batch)
            scales: `fit` calls it with other batch sizes.
        kwargs: the keyword arguments: a dict, or a callable returning one.
        name: the target's name; by default the callable's `__name__`.
        policies: extra policy names mapped to policy callables, which the
            target can then be analysed under by name.
        params: what the function trains: positions in `args` that are
            parameters (one int, or a tuple). The compiled gradient
            differentiates these (floating-point leaves only); without
            `params`, the first argument, as `jax.value_and_grad` does. With
            `optimizer` (an optax transformation), the compiled figure is one
            training step (the gradient, the optimizer's update, parameters
            and optimizer state donated), not the gradient alone.
        optimizer: the optax transformation updating `params`.
        train_step: a step of one's own: `train_step(params, opt_state,
            *batch, loss=loss) -> (params, opt_state)`, where `params` is
            `args[i]` for the one position in `params` (a tuple of them for
            several), `batch` the other positional arguments, and
            `loss(params, *batch)` the decorated function under the
            configuration being measured (differentiate that one, or the
            policy under study is not in the step). It may also return the
            loss, as a loop that logs it does.
        opt_state: the optimizer state of `train_step`: an example pytree, or
            a function of the parameters returning one (`optimizer.init`);
            by default `optimizer.init`.
        verify_args: the arguments `remat_tui.verify` (and `remat-tui
            verify`) runs the step with, in place of `args`: real arrays, as
            a tuple or a callable returning one (taking `devices` as `args`
            may). Give them where `args` gives shapes only and a value
            matters: integer inputs in their range (token ids below the
            vocabulary's size), where verify would otherwise fill zeros.
            By default verify runs `args`' own arrays, and seeded random
            floats (integer zeros) for its `jax.ShapeDtypeStruct`s.

    Raises:
        TypeError: arguments that do not go together (`params` without
            `optimizer` or `train_step`, ...), or a callable with no usable
            name and no `name`.
    """
    # Long for its docstring, the users' reference on the API page; the code is 25 lines.
    _check_training(params, optimizer, train_step, opt_state)
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
                    train_step=train_step,
                    opt_state=opt_state,
                    verify_args=verify_args,
                )
            )
        return fn

    return register


def _check_training(
    params: tuple[int, ...] | int | None,
    optimizer: Any,
    train_step: Callable | None,
    opt_state: Any,
) -> None:
    """What a training step needs, said at decoration time."""
    if train_step is not None:
        if params is None:
            raise TypeError(
                "remat_tui.target: train_step needs params=(0,): the argument positions "
                "that are parameters, which the step receives first"
            )
        if optimizer is None and opt_state is None:
            raise TypeError(
                "remat_tui.target: train_step needs its optimizer state: opt_state=optimizer.init "
                "(or an example state), or optimizer=<the optax transformation>"
            )
        return
    if opt_state is not None:
        raise TypeError("remat_tui.target: opt_state goes with train_step")
    # params alone names what the compiled gradient differentiates.
    if optimizer is not None and params is None:
        raise TypeError(
            "remat_tui.target: optimizer needs params: params=(0,) names the arguments that "
            "are parameters, optimizer=optax.adam(1e-3) what updates them"
        )
