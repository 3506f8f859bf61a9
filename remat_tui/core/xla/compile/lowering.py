"""Provides `lower`: what `xla.compile.costs` compiles, lowered for the example
arguments' shapes: the step a training loop runs (Contract 9).

The gradient: `jax.vjp` of the configured function applied to a cotangent of
ones, under `jax.jit`, returning the function's output beside the gradients,
as `jax.value_and_grad` does for a scalar loss. Like `jax.value_and_grad`, it
differentiates the first argument (the parameters, not the batch), or the
positions the target names with `params=`, floating-point leaves only
(`xla.compile.differentiated`): gradients of the batch are work and memory the
step users run does not have (a big_vision ViT on CPU, as reported in issue
30: 444.9 MiB with the images' and labels' gradients, 440.2 MiB without).

Keeping the output matters: a loop logs its loss, and with the output
dropped XLA deletes forward work the real step does and fuses the rest
differently (measured on CPU: eight rounds of `tanh(exp(sin(x)))` on a
16 MiB input compile to 0 B of temporaries with the loss dropped, 256 MiB
with it kept).

Or, for a target that says what it trains (Contract 8), one training step:
its own `train_step`, or the gradient with its optax optimizer's update
applied (returning the loss too), parameters and optimizer state donated as a
training loop runs it; sharded parameters keep their sharding and the
optimizer state is sharded as XLA shards its initialisation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import SingleDeviceSharding

from remat_tui.core.setup.config import Config
from remat_tui.core.setup.usererrors import describe, user_traceback
from remat_tui.core.trace.configured import Cancelled, configured_function
from remat_tui.core.xla.compile.differentiated import (
    Differentiated,
    differentiated,
    parameter_positions,
)
from remat_tui.errors import RematError
from remat_tui.registry import Target

if TYPE_CHECKING:
    from remat_tui.core.setup.arguments import FlatArguments


@dataclass(frozen=True)
class Lowered:
    """A lowered step, and how to call its executable (`xla.run.measure`
    runs it): `inputs(leaves, fill)` makes its arguments from the target's
    flat arguments, real arrays placed as `abstract` says (`fill(example,
    sharding)` makes one more from an example leaf); a training step gives
    back its first `carried` arguments (parameters and optimizer state, which
    it donates) as its first outputs, for the next step to take."""

    lowered: jax.stages.Lowered
    inputs: Callable[[list, Callable], tuple]
    carried: int = 0
    # What the gradient (or the optax step) differentiates; None for a
    # train_step of the user's own, whose code decides.
    differentiated: Differentiated | None = None


def lower(
    target: Target,
    config: Config,
    flat: FlatArguments,
    here: jax.Device,
    abstract: list,
    what: str,
) -> Lowered:
    """The gradient, or one training step for a target that says what it
    trains, lowered for `abstract` (the traced leaves of `flat`, placed)."""
    flat_fn, _, _ = configured_function(target, config, flat, here)
    with _lowering(what):
        if target.trains:
            return _lower_step(target, flat_fn, flat.in_tree, abstract, what)
        wrt = differentiated(target, flat.in_tree, abstract, what)
        lowered = jax.jit(_gradient_of(flat_fn, wrt.leaves)).lower(*abstract)
        return Lowered(lowered, lambda leaves, fill: tuple(leaves), differentiated=wrt)


def _gradient_of(flat_fn: Callable, leaves: tuple[int, ...]) -> Callable:
    """The gradient step of `flat_fn` (taking every flat leaf), differentiating
    the leaves at `leaves` alone: the others are held as the inputs they are."""

    def step(*flat: Any) -> Any:
        def of(*chosen: tuple) -> Any:
            given = dict(zip(leaves, chosen, strict=True))
            return flat_fn(*(given.get(i, x) for i, x in enumerate(flat)))

        return _gradient(of, tuple(flat[i] for i in leaves))

    return step


def _gradient(fn: Callable, primals: tuple) -> tuple:
    """(`fn`'s output, its vjp applied to a cotangent of ones): for a scalar
    loss, what `jax.value_and_grad` computes."""
    out, vjp_fn = jax.vjp(fn, *primals)
    return out, vjp_fn(jax.tree_util.tree_map(_ones_like, out))


@contextlib.contextmanager
def _lowering(what: str) -> Iterator[None]:
    """Tracing and lowering run the user's code: its errors are said as theirs."""
    try:
        yield
    except (RematError, Cancelled):
        raise
    except Exception as exc:
        raise RematError(f"{what} failed: {describe(exc)}\n{user_traceback(exc)}") from None


def _lower_step(
    target: Target, flat_fn: Callable, in_tree: Any, abstract: list, what: str
) -> Lowered:
    """One training step lowered for `abstract`, parameters and optimizer
    state donated, as a training loop runs it: the target's own `train_step`,
    or the loss and its gradient (`_gradient`) with its optax optimizer's
    update applied, returning the loss too."""
    args, kwargs = jax.tree_util.tree_unflatten(in_tree, abstract)
    positions = parameter_positions(target, len(args), what)

    def split(args: tuple) -> tuple[Any, tuple]:
        """(params, batch): the step's two kinds of argument."""
        params = tuple(args[i] for i in positions)
        params = params[0] if len(positions) == 1 else params
        return params, tuple(a for i, a in enumerate(args) if i not in positions)

    params, batch = split(args)

    def loss_with(kw: dict) -> Callable:
        """The configured function of (params, *batch), as the step sees it."""

        def loss(params: Any, *batch: Any) -> Any:
            given = iter((params,) if len(positions) == 1 else params)
            rest = iter(batch)
            merged = tuple(next(given) if i in positions else next(rest) for i in range(len(args)))
            return flat_fn(*jax.tree.leaves((merged, kw)))

        return loss

    user_step = target.train_step or _optax_step(target.optimizer, what)

    def step(params: Any, opt_state: Any, batch: tuple, kw: dict) -> Any:
        out = user_step(params, opt_state, *batch, loss=loss_with(kw))
        want = jax.tree.structure((params, opt_state))
        # A third element (the loss, or metrics) is returned as a loop logs it.
        if not (
            isinstance(out, tuple)
            and len(out) in (2, 3)
            # jax's PyTreeDef aliases a compiled type mypy cannot read (it has __eq__)
            and jax.tree.structure(out[:2]) == want  # type: ignore[operator]
        ):
            raise RematError(
                f"{what}: train_step must return (params, opt_state), or (params, opt_state, "
                f"loss), shaped as it received them; it returned {jax.tree.structure(out)}, "
                f"not {want}."
            )
        return out

    with _mesh_of(abstract):
        opt_state = _state(target, params, what)
        lowered = jax.jit(step, donate_argnums=(0, 1)).lower(params, opt_state, batch, kwargs)

    def inputs(leaves: list, fill: Callable) -> tuple:
        real_args, real_kwargs = jax.tree_util.tree_unflatten(in_tree, leaves)
        real_params, real_batch = split(real_args)
        with _mesh_of(abstract):
            real_state = _real_state(target, real_params, opt_state, fill)
        return real_params, real_state, real_batch, real_kwargs

    # The optax step differentiates the parameters; a step of one's own, what its code says.
    wrt = None if target.train_step else differentiated(target, in_tree, abstract, what)
    return Lowered(lowered, inputs, carried=2, differentiated=wrt)


def _mesh_of(abstract: list) -> contextlib.AbstractContextManager:
    """The mesh the arguments are sharded over, entered: the optimizer builds
    its state inside the step, and an explicitly sharded mesh wants to be the
    current one for that, a mesh of one device too (the user gave it; their
    code may name its axes). No mesh: nothing to enter."""
    meshes = {getattr(x.sharding, "mesh", None) for x in abstract} - {None}
    if len(meshes) != 1:
        return contextlib.nullcontext()
    return jax.set_mesh(meshes.pop())


def _optax_step(optimizer: Any, what: str) -> Callable:
    try:
        import optax
    except ImportError:
        raise RematError(
            f"{what}: the target names an optimizer, which needs optax: "
            "pip install 'remat-tui[examples]' (or pip install optax)."
        ) from None

    def step(params: Any, opt_state: Any, *batch: Any, loss: Callable) -> tuple:
        value, (grads,) = _gradient(lambda p: loss(p, *batch), (params,))
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return step


def _state(target: Target, params: Any, what: str) -> Any:
    """The optimizer state's shapes, placed as the parameters are: on their
    one device, or, for sharded parameters, as XLA shards the state's
    initialisation from them (a small compile)."""
    init = target.opt_state if target.opt_state is not None else target.optimizer.init
    if not callable(init):  # an example state
        example = init
        init = lambda _: example  # noqa: E731
    devices = {d for x in jax.tree.leaves(params) for d in x.sharding.device_set}
    if len(devices) <= 1:
        placed = SingleDeviceSharding(next(iter(devices))) if devices else None
        return jax.tree.map(
            lambda s: jax.ShapeDtypeStruct(jnp.shape(s), jnp.result_type(s), sharding=placed),
            jax.eval_shape(init, params),
        )
    shapes = jax.eval_shape(init, params)
    shardings = jax.jit(init).lower(params).compile().output_shardings
    return jax.tree.map(
        lambda s, sharding: jax.ShapeDtypeStruct(
            jnp.shape(s), jnp.result_type(s), sharding=sharding
        ),
        shapes,
        shardings,
    )


def _real_state(target: Target, params: Any, abstract_state: Any, fill: Callable) -> Any:
    """The optimizer state a loop starts from: its init run on the real
    parameters (placed as the lowered step expects), or the target's example
    state where it gave one."""
    init = target.opt_state if target.opt_state is not None else target.optimizer.init
    shardings = jax.tree.map(lambda s: s.sharding, abstract_state)
    if callable(init):
        return jax.jit(init, out_shardings=shardings)(params)
    return jax.tree.map(fill, init, shardings)


def _ones_like(out: Any) -> Any:
    """The cotangent of one output: ones, or float0 zeros for an integer output."""
    dtype = jnp.result_type(out)
    if jnp.issubdtype(dtype, jnp.inexact):
        return jnp.ones_like(out)
    return np.zeros(np.shape(out), jax.dtypes.float0)
