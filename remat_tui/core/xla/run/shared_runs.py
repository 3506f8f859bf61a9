"""Provides what `--measure` and `verify` share where both are asked for
(issue 43): `sharing(seed)`, within which measure (`xla.run.measure`)
runs a configuration on verify's inputs for that seed and keeps its first,
untimed run's outputs (`keep`); and `kept`, which verify
(`xla.verify.runs`) takes in place of compiling and running that
configuration again. So a command given both compiles each measured
configuration once and runs it `runs` + 1 times: verifying it adds only
the code as written's runs, which verify keeps per target, device and seed.

verify's inputs (`arguments`): the target's `verify_args` where it gives
them, else its example arrays (`setup.loading`'s verify_arguments),
built once per target and device and kept, so that the code as written and
a measured configuration start from the same arrays even where a factory
draws afresh each call; for each `jax.ShapeDtypeStruct`, values from a
generator seeded with the seed, afresh for each run (`xla.run.measure`'s `filler`).

Kept: the first run's outputs on the host (`jax.device_get`, as verify
reads them), with what verify needs to name them; at most KEPT runs, and
at most a quarter of the memory available when one is kept (a large model's
gradients are gigabytes), least recently used dropped; a run larger than
that alone is not kept. suggest measures many candidates and verifies only
its answer: an answer whose run was dropped is compiled and run again by
verify, as it would be without sharing.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from remat_tui.core.runtime.lru import LRU

if TYPE_CHECKING:
    import jax

    from remat_tui.core.setup.config import Config
    from remat_tui.registry import Target

SEED = 0  # verify's inputs' seed, unless asked otherwise
KEPT = 8  # configurations' first runs kept for verify
BUDGET_UNKNOWN = 1 << 30  # bytes of runs kept where the machine does not say its memory
ARGUMENTS_KEPT = 2  # targets' verify arguments kept (as many as verify keeps references)

# The seed verify will run with, while a command that measures and verifies
# runs; None: measure keeps nothing.
_seed: contextvars.ContextVar[int | None] = contextvars.ContextVar("verify_seed", default=None)


@dataclass(frozen=True, eq=False)
class Ran:
    """A configuration's first run, on verify's inputs: its outputs on the
    host, how many of its arguments a training step carries (`carried`), the
    flat indices of the arguments its gradients are of (`wrt`; None for a
    training step), and its inputs' leaves given by the target and drawn."""

    target: Target
    outputs: Any
    carried: int
    wrt: tuple[int, ...] | None
    given: int
    drawn: int
    nbytes: int = 0  # the outputs' size on the host


_runs: LRU[Ran] = LRU(KEPT)  # (id(target), config without device, device label, seed)
_arguments: LRU[tuple[Any, tuple]] = LRU(ARGUMENTS_KEPT)  # (id(target), label) -> (target, args)


@contextlib.contextmanager
def sharing(on: bool, seed: int = SEED) -> Iterator[None]:
    """Within it (where `on`: a command that measures and verifies), measure
    runs on verify's inputs for `seed` and keeps each configuration's first
    run for verify."""
    token = _seed.set(seed if on else None)
    try:
        yield
    finally:
        _seed.reset(token)


def shared_seed() -> int | None:
    """The seed of the verify a measure now shares its runs with, or None."""
    return _seed.get()


def arguments(target: Target, dev: jax.Device) -> tuple[tuple, dict]:
    """verify's (args, kwargs) for `target` on `dev`'s devices, built once
    (module doc)."""
    from remat_tui.core.setup.devices import device_label, device_set
    from remat_tui.core.setup.loading import verify_arguments

    key = (id(target), device_label(dev))
    hit = _arguments.get(key)
    if hit is not None and hit[0] is target:
        return hit[1]
    made = verify_arguments(target, device_set(dev))
    _arguments.put(key, (target, made))
    return made


def room_for(nbytes: int) -> bool:
    """Whether a run of outputs this large may be kept (module doc)."""
    return nbytes <= _budget()


def keep(target: Target, config: Config, label: str, seed: int, ran: Ran) -> None:
    """Keep `ran` as `config`'s first run, dropping the least recently used
    beyond KEPT runs or the memory budget."""
    _runs.put(_key(target, config, label, seed), ran)
    budget = _budget()
    while len(_runs) > 1 and sum(r.nbytes for r in _runs.values()) > budget:
        oldest = _runs.values()[0]
        _runs.retain(lambda _, r: r is not oldest)  # noqa: B023 (used at once)


def kept(target: Target, config: Config, label: str, seed: int) -> Ran | None:
    """`config`'s first run on verify's inputs for `seed`, where a measure
    kept it; else None."""
    ran = _runs.get(_key(target, config, label, seed))
    return ran if ran is not None and ran.target is target else None


def forget() -> None:
    """Drop every kept run and argument (tests, benchmarks)."""
    _runs.clear()
    _arguments.clear()


def _budget() -> int:
    from remat_tui.core.runtime.machine import available_ram

    available = available_ram()
    return BUDGET_UNKNOWN if available is None else available // 4


def _key(target: Target, config: Config, label: str, seed: int) -> tuple:
    return (id(target), config.with_device(None), label, seed)
