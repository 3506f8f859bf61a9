"""Provides `verify` (Contract 18): whether a configuration computes what the
code as written computes, run on the device.

The step is the one `xla.run.measure` runs (the loss and its gradient, or
the training step: `xla.compile.lowering`), compiled (`compile_step`) and run
once under the configuration and once as the code is written (no outer
policy, no site overridden, no structure), on the configuration's device,
with the same inputs: the target's `verify_args` where it gives them, else
its example arrays, and for each `jax.ShapeDtypeStruct` values drawn from a
generator seeded with `seed` afresh for each run (floats normal, integers
zeros: `xla.run.measure`'s `filler`). A training step donates its inputs, so each
run gets copies.

Compared: the loss and every gradient (for a training step, the loss it
returns and the new parameters), leaf by leaf, each named by its path
(`params['W1']`): bitwise equal or not, the largest absolute and relative
difference, against a tolerance from the dtype and from the reference's own
sensitivity (`xla.verify.leaves` says how). The reference is compiled
a second time for that, with XLA's backend optimisations off.

A structure on a scan Linen's nn.scan made is pasted with a line that
converts the stored parameters to its layout: the configuration's run
passes them through that very line (`_as_pasted`), so the check covers it.

Where the command measured the configuration too (`--measure --verify`),
measure ran it on these inputs and kept its first run
(`xla.run.shared_runs`): verify takes that run and compiles and runs only
the code as written.

What it proves: these values, on these inputs, on this device, with this
JAX and XLA. Not other inputs (a branch the values did not take), not other
devices or versions. A deviceless TPU topology cannot run a step: there the
verdict is "not_run" and nothing is claimed; likewise where a step does not
fit the device.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from remat_tui.core.display import Displayable
from remat_tui.core.jaxcompat.program import callback_errors_unlogged, forget_failed_effects
from remat_tui.core.runtime.lru import LRU
from remat_tui.core.setup.arguments import flatten_arguments
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import device_label, topology_of
from remat_tui.core.trace.configured import Cancelled, check_cancelled
from remat_tui.core.xla.compile import service as compile_service
from remat_tui.core.xla.compile.costs import CompiledStep, compile_step
from remat_tui.core.xla.run import shared_runs
from remat_tui.core.xla.run.measure import filler, run_error, step_inputs
from remat_tui.core.xla.verify.leaves import RULE, Leaf, compare_leaf, json_number
from remat_tui.errors import RematError
from remat_tui.registry import Target

if TYPE_CHECKING:
    from remat_tui.core.xla.verify.decisions import Culprit, Decision

REFERENCES = 2  # the code as written's runs kept (per target, device and seed)
SEED = shared_runs.SEED  # the inputs' generator's seed, the same for every run
# The reference compiled a second time, for its own sensitivity (`xla.verify.leaves`).
# (A string: JAX parses it as the option's type; its annotation takes no int.)
OTHERWISE: dict[str, str | bool] = {"xla_backend_optimization_level": "0"}
# Verdicts: every leaf bitwise equal; every leaf within its tolerance; some
# leaf past it; nothing run (a deviceless topology, a step that does not fit).
EQUAL, AGREE, DIFFER, NOT_RUN = "equal", "agree", "differ", "not_run"


@dataclass(frozen=True)
class Verification(Displayable):
    """What `verify` found: the `verdict` (EQUAL, AGREE, DIFFER or NOT_RUN,
    with `reason`), the leaves compared, the configuration and device, and
    how the inputs were made. `to_dict()` is the JSON's `gradients`."""

    verdict: str
    leaves: tuple[Leaf, ...]
    config: str  # the configuration's label
    device: str
    step: str  # "gradient" or "train"
    inputs: dict  # {"seed", "given", "drawn"}: leaves from the target, leaves drawn
    seconds: float = 0.0
    reason: str | None = None  # why nothing was run
    # Where the gradients differ: the calls back to Python ("pure_callback
    # at model.py:39") this configuration runs again in the backward pass
    # (where none is found, every one the program makes).
    callbacks: tuple[str, ...] = ()
    # Where asked (`xla.verify.bisect`'s verify_explained): what the
    # configuration changes against the code as written, and where the
    # gradients differ, the fewest of those that move them.
    decisions: tuple[Decision, ...] = ()
    culprit: Culprit | None = None
    # A structure whose pasted code moves the stored parameters (a Linen
    # nn.scan's): what verify did to them, in one line; None where nothing moves.
    parameters: str | None = None

    @property
    def ok(self) -> bool:
        """The gradients agree (bitwise or within the tolerance)."""
        return self.verdict in (EQUAL, AGREE)

    @property
    def differing(self) -> list[Leaf]:
        return [leaf for leaf in self.leaves if not leaf.within]

    @property
    def bitwise_leaves(self) -> int:
        return sum(leaf.bitwise for leaf in self.leaves)

    @property
    def max_abs(self) -> float:
        return max((leaf.max_abs for leaf in self.leaves), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((leaf.max_rel for leaf in self.leaves), default=0.0)

    def to_dict(self) -> dict:
        return {
            "verdict": self.verdict,
            "bitwise_leaves": self.bitwise_leaves,
            "leaf_count": len(self.leaves),
            "max_abs": json_number(self.max_abs),
            "max_rel": json_number(self.max_rel),
            "tolerance": RULE,
            "device": self.device,
            "config": self.config,
            "reference": "the code as written",
            "step": self.step,
            "inputs": dict(self.inputs),
            "seconds": self.seconds,
            "reason": self.reason,
            "callbacks": list(self.callbacks),
            "leaves": [leaf.to_dict() for leaf in self.leaves],
            "decisions": [d.to_dict() for d in self.decisions],
            "culprit": self.culprit.to_dict() if self.culprit is not None else None,
            "parameters": self.parameters,
        }


def verify(
    target: Target,
    config: Config,
    cancelled: Callable[[], bool] | None = None,
    *,
    seed: int = SEED,
) -> Verification:
    """Run `config`'s step and the code as written's on `config`'s device with
    the same inputs, and compare them (module doc). A compile or a run that
    fails raises RematError; a device that cannot run says NOT_RUN.
    `xla.verify.bisect`'s `verify_explained` says which of `config`'s
    decisions moved the gradients where they differ."""
    start = time.perf_counter()
    dev = config.jax_device
    label = device_label(dev)
    step_kind = "train" if target.trains else "gradient"
    if topology_of(dev) is not None:
        return _not_run(config, label, step_kind, start,
                        f"{label} is a deviceless TPU topology: it compiles here but cannot run "
                        "a step, so verify needs the chip itself (--device tpu:0 on a TPU "
                        "machine); nothing is claimed")  # fmt: skip
    reference = _reference(target, config, seed, cancelled)
    if isinstance(reference, str):
        return _not_run(config, label, step_kind, start, reference)
    pasted, parameters = _as_pasted(target, config, reference.arguments)
    # A measured run is of the structure as remat-tui rebuilds it, not as
    # pasted: where the paste converts parameters, verify runs it itself.
    ran = shared_runs.kept(target, config, label, seed) if pasted is target else None
    if ran is None:
        step = compile_step(pasted, config, cancelled, device=dev, arguments=reference.arguments)
        if step.executable is None:
            return _not_run(config, label, step_kind, start, _too_big(config, label))
        check_cancelled(cancelled)
        ran = _run(step, step.executable, seed, target)
    got = _compared(ran, target, reference.names)
    leaves = tuple(
        compare_leaf(name, g, w, a)
        for (name, g), (_, w), (_, a) in zip(got, reference.want, reference.again, strict=True)
    )
    if all(leaf.bitwise for leaf in leaves):
        verdict = EQUAL
    elif all(leaf.within for leaf in leaves):
        verdict = AGREE
    else:
        verdict = DIFFER
    inputs = {"seed": seed, "given": ran.given, "drawn": ran.drawn}
    callbacks = _callbacks(target, config) if verdict == DIFFER else ()
    return Verification(
        verdict, leaves, config.with_device(None).label(), label, step_kind, inputs,
        time.perf_counter() - start, callbacks=callbacks, parameters=parameters,
    )  # fmt: skip


def _as_pasted(target: Target, config: Config, arguments: tuple) -> tuple[Target, str | None]:
    """The target to run `config` on, and what was done to its parameters.
    A structure on a scan Linen's nn.scan made is pasted with a line that
    converts the stored parameters to the structure's layout: the target's
    are passed through that very line, and read back in the layout the
    structure's program reads (`trace.stored_layout`), so that the
    check covers the paste. A structure on a plain jax.lax.scan regroups
    inside the step: nothing to convert (None)."""
    from remat_tui.core.trace.linen_call import read_scan_call
    from remat_tui.core.trace.rebuilt_scans import scan_of
    from remat_tui.core.trace.stored_layout import find_conversion
    from remat_tui.core.xla.verify.program_names import primal_as_written

    structure = config.structure
    if structure is None:
        return target, None
    primal = primal_as_written(target, config.jax_device)
    if primal is None:
        return target, None
    scan = scan_of(primal.scans, structure)
    if scan.library != "flax.linen":
        return target, None
    call = read_scan_call(scan.source)
    if call is None:
        return target, "not converted: its nn.scan call could not be read, so neither can its line"
    found = find_conversion(
        structure, scan.length, call.name, arguments[0], _positional_names(target.fn)
    )
    if isinstance(found, str):
        return target, f"not converted: {found}"
    return replace(target, fn=found.applied(target.fn)), found.line()


def _callbacks(target: Target, config: Config) -> tuple[str, ...]:
    """The calls back to Python (`pure_callback at model.py:39`) that
    `config`'s backward pass runs again and the code as written's does not,
    the likeliest reason its gradients differ; where none is found (or the
    program cannot be analysed), every one the program makes."""
    from remat_tui.core.xla.verify.program_names import program_callbacks, rerun_callbacks

    return rerun_callbacks(target, config) or program_callbacks(target, config.jax_device)


@dataclass(frozen=True, eq=False)
class _Reference:
    """The code as written, run: the arguments it ran from (the
    configuration runs from the same), its outputs' names, its outputs
    (`want`), and its outputs compiled otherwise (`again`)."""

    target: Target
    arguments: tuple
    names: list[str]
    want: list[tuple[str, np.ndarray]]
    again: list[tuple[str, np.ndarray]]


# (id(target), device label, seed) -> its reference: verifying several
# configurations of one target (a test of every policy, suggest's answers)
# runs the code as written once.
_references: LRU[_Reference] = LRU(REFERENCES)


def _reference(
    target: Target, config: Config, seed: int, cancelled: Callable[[], bool] | None
) -> _Reference | str:
    """The code as written run on `config`'s device (kept), or why it cannot be."""
    dev = config.jax_device
    key = (id(target), device_label(dev), seed)
    kept = _references.get(key)
    if kept is not None and kept.target is target:
        return kept
    arguments = shared_runs.arguments(target, dev)
    written = Config(device=config.device)
    step = compile_step(target, written, cancelled, device=dev, arguments=arguments)
    if step.executable is None:
        return _too_big(written, device_label(dev))
    check_cancelled(cancelled)
    otherwise = _compiled_otherwise(step, target)
    names = _leaf_names(
        target.fn, flatten_arguments(target.fn, arguments[0], arguments[1], target.label).traced()
    )
    want = _compared(_run(step, step.executable, seed, target), target, names)
    check_cancelled(cancelled)
    again = _compared(_run(step, otherwise, seed, target), target, names)
    reference = _Reference(target, arguments, names, want, again)
    _references.put(key, reference)
    return reference


def _too_big(config: Config, label: str) -> str:
    return (
        f"the step under {config.with_device(None).label()} does not fit {label}, so it "
        "cannot run there; nothing is claimed"
    )


def _not_run(config: Config, label: str, step: str, start: float, why: str) -> Verification:
    inputs = {"seed": SEED, "given": 0, "drawn": 0}
    return Verification(NOT_RUN, (), config.with_device(None).label(), label, step, inputs,
                        time.perf_counter() - start, why)  # fmt: skip


def _compiled_otherwise(step: CompiledStep, target: Target) -> Any:
    """The reference's program compiled again with XLA's backend optimisations
    off: not a program any configuration is, so it goes to no cache."""
    assert step.lowered is not None  # compile_step keeps it
    try:
        executable = step.lowered.lowered.compile(compiler_options=OTHERWISE)
    except Exception as exc:
        raise RematError(
            f"{target.label}: compiling the code as written again with {OTHERWISE} for "
            f"verify's tolerance failed: {run_error(exc)}"
        ) from None
    compile_service.counts.add(compile_service.COMPILED)  # said with the command's compiles
    return executable


def _run(step: CompiledStep, executable: Any, seed: int, target: Target) -> shared_runs.Ran:
    """One run of `executable` (`step` or its program compiled otherwise) on
    inputs drawn with `seed` (a generator of their own), its outputs on the
    host."""
    fill = filler(np.random.default_rng(seed))
    try:
        inputs = step_inputs(step, fill, copy=True)
        with callback_errors_unlogged():
            outputs = executable(*inputs)
            host = jax.device_get(outputs)
    except (RematError, Cancelled):
        raise
    except Exception as exc:
        forget_failed_effects()
        raise RematError(
            f"{target.label}: the step raised when run for verify: {run_error(exc)}"
        ) from None
    lowered = step.lowered
    assert lowered is not None  # compile_step keeps how to call what it compiled
    wrt = lowered.differentiated
    drawn = sum(isinstance(x, jax.ShapeDtypeStruct) for x in step.leaves)
    return shared_runs.Ran(
        target, host, lowered.carried, None if wrt is None else tuple(wrt.leaves),
        len(step.leaves) - drawn, drawn,
    )  # fmt: skip


def _compared(ran: shared_runs.Ran, target: Target, names: list[str]) -> list[tuple[str, Any]]:
    """(name, value) of each output of `ran` verify compares: the loss and
    the gradients, each gradient named as its argument leaf (`names`, by
    flat index); for a training step the loss it returns and the new
    parameters (not the optimizer state)."""
    outputs = ran.outputs
    if ran.carried:
        loss = _with_paths(outputs[2], "loss") if len(outputs) > 2 else []
        return [*loss, *_param_leaves(target.fn, outputs[0], target.param_positions or (0,))]
    assert ran.wrt is not None  # a gradient step says what it differentiates
    out, grads = outputs
    return [
        *_with_paths(out, "loss"),
        *((names[i], g) for i, g in zip(ran.wrt, grads, strict=True)),
    ]


def _with_paths(tree: Any, head: str) -> list[tuple[str, Any]]:
    paths = jax.tree_util.tree_flatten_with_path(tree)[0]
    return [(head + jax.tree_util.keystr(path), x) for path, x in paths]


def _leaf_names(fn: Callable, traced: tuple) -> list[str]:
    """`params['W1']` for each leaf of (args, kwargs): the argument's name in
    `fn`'s signature (`args[2]` where it has none) and the path within."""
    positional = _positional_names(fn)
    out = []
    for path, _ in jax.tree_util.tree_flatten_with_path(traced)[0]:
        side, where, rest = path[0], path[1], path[2:]
        if getattr(side, "idx", 0) == 0:
            i = where.idx
            head = positional[i] if i < len(positional) else f"args[{i}]"
        else:
            head = str(getattr(where, "key", where))
        out.append(head + jax.tree_util.keystr(tuple(rest)))
    return out


def _param_leaves(fn: Callable, params: Any, positions: tuple[int, ...]) -> list[tuple[str, Any]]:
    """The new parameters, named as `_leaf_names` names them: the step's
    params are the one argument, or a tuple of the arguments at `positions`."""
    positional = _positional_names(fn)
    ordered = sorted(set(positions))

    def head(i: int) -> str:
        return positional[i] if i < len(positional) else f"args[{i}]"

    out = []
    for path, x in jax.tree_util.tree_flatten_with_path(params)[0]:
        if len(ordered) == 1:
            out.append((head(ordered[0]) + jax.tree_util.keystr(tuple(path)), x))
        else:
            i = ordered[path[0].idx]
            out.append((head(i) + jax.tree_util.keystr(tuple(path[1:])), x))
    return out


def _positional_names(fn: Callable) -> list[str]:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a callable without a signature
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in parameters if p.kind in kinds]
