"""Provides `program_key` (the hash of a configuration's lowered step: two
configurations with one key compile to one program) and `verdicts`: for a
compiled configuration, the parts whose removal compiles to the same
program, so change nothing XLA runs (Contract 14's "did it apply"): the
outer policy against the code as written, and each name the outer policy
lists against the policy without it.

The key is `xla.compile.shared`'s: the lowered StableHLO module's text
(`Lowered.as_text()`, which prints no source locations, so lines and op
names, metadata, do not tell two programs apart), hashed, with the device.
Lowering is the cheap part of a compile (a trace), so each check costs one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace

import jax

from remat_tui.core.setup import policies
from remat_tui.core.setup.arguments import flatten_arguments
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import device_label, device_set, trace_device
from remat_tui.core.setup.loading import resolve_arguments
from remat_tui.core.trace.applied import Applied
from remat_tui.core.trace.configured import check_cancelled
from remat_tui.core.xla.compile.costs import _abstract
from remat_tui.core.xla.compile.lowering import lower
from remat_tui.registry import Target

NAMES_CHECKED = 8  # names of the outer policy checked, at most (one lowering each)


def program_key(
    target: Target,
    config: Config,
    device: jax.Device | None = None,
    arguments: tuple[tuple, dict] | None = None,
    cancelled: Callable | None = None,
) -> str:
    """The hash of `config`'s lowered step on its device (or `device`):
    equal keys, one compiled program."""
    dev = config.jax_device if device is None else device
    text = lowered_step(target, config, dev, arguments, cancelled).as_text()
    return hashlib.sha256(f"{device_label(dev)}\n{text}".encode()).hexdigest()


def lowered_step(
    target: Target,
    config: Config,
    dev: jax.Device,
    arguments: tuple[tuple, dict] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> jax.stages.Lowered:
    """`config`'s step lowered for the device `dev` (a jax.Stages.Lowered),
    as `xla.compile.costs` lowers it before compiling."""
    devices = device_set(dev)
    args, kwargs = arguments if arguments is not None else resolve_arguments(target, devices)
    flat = flatten_arguments(target.fn, args, kwargs, target.label)
    here = trace_device(dev)
    what = f"{target.label}: lowering the step under {config.with_device(None).label()}"
    abstract = [_abstract(x, dev, devices, what) for x in flat.leaves]
    check_cancelled(cancelled)
    with jax.default_device(here):
        return lower(target, config, flat, here, abstract, what).lowered


def verdicts(
    target: Target,
    config: Config,
    dev: jax.Device,
    arguments: tuple[tuple, dict],
    flagged: list[Applied],
    cancelled: Callable[[], bool] | None = None,
) -> list[Applied]:
    """`flagged` (the structural verdicts, `trace.applied`) with what
    compiles to the same program: said as a verdict of its own, or added to
    the one already flagging that part."""
    spec = config.spec
    if spec.kind == policies.AS_WRITTEN:
        return flagged
    key = program_key(target, config, dev, arguments, cancelled)
    out = list(flagged)

    def same(what: str, other: Config, words: str) -> None:
        if program_key(target, other, dev, arguments, cancelled) != key:
            return
        said = "; it compiles to the same program (the program's hash is equal)"
        for i, v in enumerate(out):
            if v.what == what:
                out[i] = replace(v, why=v.why + said)
                return
        out.append(Applied(what, words, "same_program"))

    same("the outer policy", config.with_policy(policies.PolicySpec(policies.AS_WRITTEN)),
         f"{spec.canonical} compiles to the same program as the code as written: "
         "it changes nothing XLA runs")  # fmt: skip
    for name in sorted(spec.mentioned_names())[:NAMES_CHECKED]:
        without = without_name(spec, name)
        if without is not None:
            same(f"name {name!r} in the outer policy", config.with_policy(without),
                 f"{without.canonical}, without {name!r}, compiles to the same program: "
                 f"{name!r} changes nothing XLA runs")  # fmt: skip
    return out


def without_name(spec: policies.PolicySpec, name: str) -> policies.PolicySpec | None:
    """`spec` with `name` dropped from its lists; None where nothing lists it."""
    if spec.kind == policies.BOTH:
        parts = tuple(without_name(p, name) or p for p in spec.parts)
        return replace(spec, parts=parts) if parts != spec.parts else None
    if name not in spec.names and name not in spec.offloaded:
        return None
    return replace(
        spec,
        names=tuple(n for n in spec.names if n != name),
        offloaded=tuple(n for n in spec.offloaded if n != name),
    )
