"""Provides `compile_shared`: compile_costs answered by an identical program's
compile where one was made before, for searches that compile many
configurations (fit, core/search/fit.py).

Different configurations are often the same program: `dots_saveable` and
`dots_with_no_batch_dims_saveable` on a model whose dots have no batch
dimensions, or a names policy that saves what another policy saves. The test
is the program itself: the lowered StableHLO module's text (without debug
information, so source lines and op names, which are metadata, do not tell
two programs apart), hashed, with the device it is compiled for. XLA compiles
one module for one device to the same program, so an identical text is
answered by the first compile's numbers. Lowering is the cheap part: measured
here on a small MLP, 40-110 ms to lower against 250-400 ms to compile on the
CPU; for a GPT on a deviceless TPU, about 0.35 s against 20-70 s.

Only numbers are kept (a few hundred bytes each), so many can be.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import NamedTuple

from remat_tui.core.lru import LRU
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import device_label
from remat_tui.core.xla.compiled import Compiled, compile_costs
from remat_tui.registry import Target

LIMIT = 1024  # programs' numbers kept
COMPILED, SAME_PROGRAM, CACHED = "compiled", "same program", "cached"
# (sha256 of the module's text, device label) -> Compiled
_known = LRU(LIMIT)


class Shared(NamedTuple):
    result: Compiled
    how: str  # COMPILED (XLA compiled it now), SAME_PROGRAM or CACHED (see compile_shared)
    program: tuple | None  # the program's key (None when CACHED: it was not lowered)


def compile_shared(
    target: Target, config: Config, device, cancelled: Callable[[], bool] | None = None
) -> Shared:
    """XLA's numbers for `config`'s step on `device` (a jax.Device), and how
    they were had: COMPILED (XLA compiled it now), SAME_PROGRAM (an identical
    program compiled before answered) or CACHED (compile_costs had this very
    target and configuration). Failures raise as compile_costs raises."""
    label = device_label(device)
    asked: list = []  # (the program's key, the numbers known for it or None)

    def same_program(lowered) -> Compiled | None:
        key = (hashlib.sha256(lowered.as_text().encode()).hexdigest(), label)
        asked.append((key, _known.get(key)))
        return asked[-1][1]

    result = compile_costs(target, config, cancelled, device=device, same_program=same_program)
    if not asked:
        return Shared(result, CACHED, None)
    key, known = asked[0]
    if known is None:
        _known.put(key, result)
    return Shared(result, COMPILED if known is None else SAME_PROGRAM, key)


def clear() -> None:
    _known.clear()
