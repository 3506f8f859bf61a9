"""Provides what verify's explanation (`xla.verify.bisect`) reads of
the program as written, traced from the arguments verify runs it on:
`program_names` (its checkpoint_names and their lines), `site_names` (the
names made at each site a configuration overrides, and the names policy
written there: `xla.verify.decisions`'s `SiteNames`), and
`rerun_callbacks`, the calls back to Python a configuration runs again in
the backward pass that the code as written does not (`trace.effects`:
JAX's partial evaluation says which), the ones its recomputation causes,
and `program_callbacks`, every one the program makes.

Each is a hint for the explanation, never the verdict: where the program
cannot be traced it is empty, or None, and the explanation says less.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax

from remat_tui.core.runtime.lru import LRU
from remat_tui.core.setup.arguments import flatten_arguments
from remat_tui.core.setup.config import Config, SiteKey
from remat_tui.core.setup.devices import trace_device
from remat_tui.core.setup.policy_spec import names_part
from remat_tui.core.xla.run import shared_runs
from remat_tui.core.xla.verify.decisions import SiteNames

if TYPE_CHECKING:
    from remat_tui.core.trace.primal import Primal
    from remat_tui.registry import Target


def program_names(target: Target, config: Config) -> dict[str, str]:
    """The program's checkpoint_names, as written, in program order, each
    with the line that makes it first (`model.py:41`), on `config`'s device."""
    from remat_tui.core import jaxcompat as jc

    primal = primal_as_written(target, config.jax_device)
    return {} if primal is None else _made(jc.open_jaxpr(primal.closed))


def site_names(target: Target, config: Config) -> dict[SiteKey, SiteNames]:
    """For each site key `config` overrides: the names made in its body (at
    every site of a function's name) and the names policy written there,
    where every site of the key has the same one."""
    primal = primal_as_written(target, config.jax_device)
    if primal is None:
        return {}
    out = {}
    for key, _ in config.site_specs:
        found = [
            f for f in primal.sites
            if (f.site.function == key if isinstance(key, str) else f.site.id == key)
        ]  # fmt: skip
        names: dict[str, str] = {}
        for f in found:
            if f.body is not None:
                for name, where in _made(f.body).items():
                    names.setdefault(name, where)
        written = {f.site.spec for f in found}
        spec = written.pop() if len(written) == 1 else None
        by_name = spec is not None and not spec.declared and names_part(spec) == spec
        out[key] = SiteNames(names, spec if by_name else None)
    return out


def rerun_callbacks(target: Target, config: Config) -> tuple[str, ...]:
    """The calls back to Python (`pure_callback at model.py:39`) that
    `config`'s backward pass runs again and the code as written's does not;
    () where either cannot be analysed."""
    try:
        written = _written_reruns.get_or_build(
            (id(target), config.device),
            lambda: (target, _reruns(target, Config(device=config.device))),
            valid=lambda hit: hit[0] is target,
        )[1]
        return tuple(c for c in _reruns(target, config) if c not in written)
    except Exception:  # a hint: the explanation stands without it
        return ()


def program_callbacks(target: Target, dev: jax.Device) -> tuple[str, ...]:
    """Every call back to Python the program as written makes, in program
    order; () where it cannot be traced."""
    from remat_tui.core import jaxcompat as jc
    from remat_tui.core.jaxcompat.callbacks import host_callbacks

    primal = primal_as_written(target, dev)
    if primal is None:
        return ()
    return tuple(f"{c.kind} at {c.where}" for c in host_callbacks(jc.open_jaxpr(primal.closed)))


# (id(target), device) -> (target, what the code as written's backward pass runs again)
_written_reruns: LRU[tuple[Any, tuple[str, ...]]] = LRU(2)


def _reruns(target: Target, config: Config) -> tuple[str, ...]:
    from remat_tui.core.trace.analysis import analyze

    return tuple(
        f"{e.kind} at {e.where}" for e in analyze(target, config=config).effects if e.reruns
    )


def primal_as_written(target: Target, dev: jax.Device) -> Primal | None:
    """The traced program the configurations are built from (kept), on the
    arguments verify runs it on; None where it cannot be traced."""
    from remat_tui.core.trace.configured import target_dir
    from remat_tui.core.trace.primal import primal_program

    here = trace_device(dev)
    try:
        arguments = shared_runs.arguments(target, dev)
        flat = flatten_arguments(target.fn, arguments[0], arguments[1], target.label)
        with jax.default_device(here):
            return primal_program(target, flat, here, target_dir(target))
    except Exception:
        return None


def _made(jaxpr: Any) -> dict[str, str]:
    from remat_tui.core import jaxcompat as jc
    from remat_tui.core.trace.names import name_eqns

    out = {}
    for name, eqns in name_eqns(jaxpr).items():
        source = jc.user_source(eqns[0][0].source_info)
        out[name] = source.where() if source else "where JAX made it"
    return out
