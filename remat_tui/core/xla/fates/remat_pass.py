"""Provides `remat_pass`: whether XLA's own rematerialization pass changed a
compiled step, and what it changed (Contract 14's "did the compiler override
it").

XLA rematerializes on its own when a program's peak exceeds the memory limit
it compiles for: it clones forward instructions into the backward part
(their names end in `.remat`) so that their buffers can be freed in between.
It acts silently: the step fits, and takes longer (a step went from 16.4 s to
18.1 s when it kicked in over the memory limit, marin 8054). So:

- every compile with its dump says which values XLA recomputed this way
  (`clones`, from the optimized module; nothing compiled again);
- `remat_pass(..., limit_bytes=N)` compiles the step for a device with N
  bytes of memory (XLA's own option, `limit_flag`) and again with the
  device's own memory, where the pass has no reason to act, and says what the
  limit cost: peak, XLA's FLOPs and the estimated step time.

What controls it (`jaxcompat.xla_remat_pass` holds what was measured):
the memory limit, on TPU the HBM size XLA compiles for; JAX's
`jax_compiler_enable_remat_pass=False` leaves TPU's pass on. XLA's CPU
compiler has no such pass: a CPU step is never rematerialized by XLA. A
local GPU's limit is the device's memory, scaled by
`xla_gpu_memory_limit_slop_factor` (untested here: no GPU, not offered).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from remat_tui.core.jaxcompat import hlo_text, xla_remat_pass
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import device_label
from remat_tui.core.units import human_bytes
from remat_tui.core.xla.buffers.made import clones
from remat_tui.core.xla.buffers.memory import compile_with_memory
from remat_tui.core.xla.compile.compiled import Compiled, does_not_fit, out_of_memory, read
from remat_tui.core.xla.compile.same_program import lowered_step
from remat_tui.core.xla.estimates import step_time
from remat_tui.errors import RematError
from remat_tui.registry import Target

if TYPE_CHECKING:
    import jax

TPU_LIMIT_FLAG = xla_remat_pass.TPU_LIMIT_OPTION
JAX_FLAG = xla_remat_pass.JAX_OPTION


@dataclass(frozen=True)
class RematPass:
    """What XLA's rematerialization pass did to one step under a memory limit.

    Attributes:
        device: the device label.
        limit_bytes: the memory limit XLA compiled for.
        flag: the XLA option that set it, as given (`xla_tpu_max_hbm_size_mib=64`).
        acted: whether the pass changed the program (it cloned values).
        clones: what it recomputes (`tanh at model.py:12`), per clone.
        fits: whether the step fits the limit at all.
        with_limit / without_limit: {"peak_bytes", "flops", "seconds"} of
            the step compiled under the limit and with the device's own
            memory (`seconds`: the estimated step time, where the chip is known).
        words: what it did, in a sentence.
    """

    device: str
    limit_bytes: int
    flag: str
    acted: bool
    clones: tuple[str, ...]
    fits: bool
    with_limit: dict
    without_limit: dict
    words: str

    def to_dict(self) -> dict:
        return {
            "device": self.device,
            "limit_bytes": self.limit_bytes,
            "flag": self.flag,
            "acted": self.acted,
            "clones": list(self.clones),
            "fits": self.fits,
            "with_limit": dict(self.with_limit),
            "without_limit": dict(self.without_limit),
            "controls": f"the memory limit ({self.flag.split('=')[0]}); "
            f"{JAX_FLAG}=False does not turn TPU's pass off",
            "words": self.words,
        }


def remat_pass(
    target: Target, config: Config, limit_bytes: int, cancelled: Callable[[], bool] | None = None
) -> RematPass:
    """Compile `config`'s step under a memory limit of `limit_bytes` and with
    the device's own memory, and say what XLA's rematerialization pass did."""
    dev = config.jax_device
    if dev.platform != "tpu":
        raise RematError(
            f"--memory-limit compiles for a TPU's memory size (XLA's {TPU_LIMIT_FLAG}); "
            f"{device_label(dev)} is {dev.platform}: XLA's CPU compiler runs no "
            "rematerialization pass, and a GPU's limit is its own memory. Give a TPU "
            "device, e.g. --device tpu:v5e:2x2 (the tpu extra compiles for it without one)."
        )
    lowered = lowered_step(target, config, dev, cancelled=cancelled)
    flag, options = xla_remat_pass.tpu_limit(limit_bytes)
    under, found = _compile(lowered, dev, options)
    free, _ = _compile(lowered, dev, {})
    fits = under.fits
    acted = bool(found) or (fits and under.flops != free.flops)
    with_limit, without = _figures(under), _figures(free)
    return RematPass(
        device=device_label(dev),
        limit_bytes=options[TPU_LIMIT_FLAG] * 2**20,
        flag=flag,
        acted=acted,
        clones=tuple(found),
        fits=fits,
        with_limit=with_limit,
        without_limit=without,
        words=_words(acted, fits, found, with_limit, without, flag),
    )


def _compile(
    lowered: jax.stages.Lowered, dev: jax.Device, options: dict
) -> tuple[Compiled, list[str]]:
    """(the Compiled, the clones XLA's pass made), for `lowered` compiled with `options`."""
    start = time.perf_counter()
    label = device_label(dev)
    try:
        executable = compile_with_memory(lowered, options)
    except Exception as exc:
        if not out_of_memory(str(exc)):
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise RematError(f"compiling under {options} failed: {first}") from None
        return does_not_fit(str(exc), label, 1, time.perf_counter() - start), []
    seconds = time.perf_counter() - start
    result = read(executable, dev.platform, label, 1, seconds, True, True)
    text = executable.as_text()
    assert text is not None  # a TPU executable compiled here has its HLO text
    module = hlo_text.parse_hlo(text)
    return result, clones(module)


def _figures(c: Compiled) -> dict:
    chip = step_time.chip_of(c.device) if c.fits else None
    seconds = None
    if chip is not None and c.flops:
        seconds = step_time.estimate(chip, c.flops, 0, step_time.StepCounts.of(c)).seconds
    return {"peak_bytes": c.peak_bytes if c.fits else c.needed_bytes, "flops": c.flops,
            "seconds": seconds}  # fmt: skip


def _words(
    acted: bool, fits: bool, found: Sequence[str], under: dict, free: dict, flag: str
) -> str:
    if not fits:
        return (f"the step does not fit {flag} even with XLA's rematerialization: it needs "
                f"{human_bytes(under['peak_bytes'] or 0)}")  # fmt: skip
    if not acted:
        return f"XLA's rematerialization pass did not act under {flag}: the step fits as it is"
    parts = [f"XLA's rematerialization pass acted under {flag}: it recomputes {len(found)} "
             f"value{'s' if len(found) != 1 else ''} ({', '.join(found[:4])}"
             f"{', ...' if len(found) > 4 else ''})"]  # fmt: skip
    if under["peak_bytes"] and free["peak_bytes"]:
        before, after = human_bytes(free["peak_bytes"]), human_bytes(under["peak_bytes"])
        parts.append(f"peak {before} -> {after}")
    if under["flops"] and free["flops"]:
        parts.append(f"XLA's FLOPs {under['flops'] / free['flops'] - 1:+.1%}")
    if under["seconds"] and free["seconds"]:
        parts.append(f"estimated step time {under['seconds'] / free['seconds'] - 1:+.1%}")
    return "; ".join(parts) + (f". XLA decides when to act from the memory limit it compiles "
                               f"for ({flag.split('=')[0]} here) by its own accounting, which "
                               "can act under a limit above the peak shown; "
                               f"{JAX_FLAG}=False does not turn TPU's pass off")  # fmt: skip
