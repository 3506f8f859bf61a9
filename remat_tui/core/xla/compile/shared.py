"""Provides `compile_shared`: compile_answer for searches that compile many
configurations (fit, `search.fit.batches`), saying how each answer was had.

Different configurations are often the same program: `dots_saveable` and
`dots_with_no_batch_dims_saveable` on a model whose dots have no batch
dimensions, or a names policy that saves what another policy saves. Every
compile goes through `xla.compile.service`, which knows a program by
its lowered module (without debug information: source lines and op names do
not tell two programs apart), device, options and versions, and answers one
it has seen without compiling. Lowering is the cheap part: measured here on
a small MLP, 40-110 ms to lower against 250-400 ms to compile on the CPU; for
a GPT on a deviceless TPU, about 0.35 s against 20-70 s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from remat_tui.core.setup.config import Config
from remat_tui.core.xla.compile import service as compile_service
from remat_tui.core.xla.compile.compiled import Compiled
from remat_tui.core.xla.compile.costs import CACHED, Source, compile_answer
from remat_tui.registry import Target

if TYPE_CHECKING:
    import jax

COMPILED, SAME_PROGRAM = compile_service.COMPILED, compile_service.SAME_PROGRAM
STORED, IN_WORKER = compile_service.STORED, compile_service.IN_WORKER
CACHED = CACHED  # this very target and configuration, compiled before in this process
NEW = (COMPILED, IN_WORKER)  # answers XLA compiled now, here or in a worker


class Shared(NamedTuple):
    result: Compiled
    how: str  # COMPILED, IN_WORKER, SAME_PROGRAM, STORED or CACHED (see compile_shared)
    program: str | None  # the program's key (None when CACHED: it was not lowered)


def compile_shared(
    target: Target,
    config: Config,
    device: jax.Device,
    cancelled: Callable[[], bool] | None = None,
    source: Source | None = None,
) -> Shared:
    """XLA's numbers for `config`'s step on `device` (a jax.Device), and how
    they were had: COMPILED (XLA compiled it now; IN_WORKER, in a worker),
    SAME_PROGRAM (an identical program compiled before in this process
    answered), STORED (the store on disk answered) or CACHED (this very
    target and configuration were compiled before). `source`: where a worker
    finds the target. Failures raise as compile_answer raises."""
    step = compile_answer(target, config, cancelled, device=device, source=source)
    return Shared(step.result, step.how, step.program)


def clear() -> None:
    """Forget the programs compiled in this process (the store on disk stays)."""
    compile_service.clear_memo()
