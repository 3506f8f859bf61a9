"""The zoo (issue 41, Wanted 2; Contract 16): small models of the shapes
users' code has, each run through every command by the tier beside this
file (test_every_command.py, test_zoo_app.py, test_zoo_api.py).

One `Model` per target: the file the CLI opens (`FILE:NAME`), and how the
oracle builds any configuration of it by hand (`build`: one policy per
checkpoint site, in the order of remat-tui's site ids, to the function; the
outer policy is applied around it with `jax.checkpoint`). The models are
factories taking the policy (tests/zoo/models/*.py), so the oracle for a
site's change is the same source with the policy changed by hand.

A new model shape: a file in tests/zoo/models/ (its target registered with
`@remat_tui.target`, its code a `make_*(policy)` factory) and a line in

MODELS below. A model leaves a command out only with a reason (`skip`),
which the test prints.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS_DIR = os.path.join(HERE, "models")
NO_CHECKPOINT = "no checkpoint"  # each model file's spelling: the site's function called directly

# Every command the tier runs on every model (test_every_command.py runs them).
COMMANDS = (
    "report",
    "check",
    "compare",
    "diff",
    "memory",
    "suggest",
    "suggest_compiled",
    "fit",
    "fit_optimize",
    "verify",
)


@dataclass(frozen=True, eq=False)  # hashed by identity: the tier caches by model
class Model:
    """A zoo model: `file:target` for the CLI, and the oracle's factory.

    `make`: the factory's name in `factory_file` (the model's own file unless
    given), taking `policy_of` (policy_of(i) the policy of site i + 1) where
    `per_call`, else the one policy of its one site. `function`, `count`:
    the checkpointed function and how many sites it has (the trace's
    calls). `scales`: its args take `batch` (fit); `multiple`: fit's
    --multiple (a batch split over devices). `skip`: command -> why it is
    left out. `tpu`: in the deviceless-TPU subset; `app_compiled`: in the
    subset whose app search also runs with the compiled peak (`p`).
    `refused`: words of the error JAX gives a candidate it refuses on this
    model (compare must list that candidate as a row carrying it).
    `known`: (test, measure) -> a known defect of remat-tui's this model
    shows there, in words: the test expects it (and fails once it is gone,
    so that the entry goes too)."""

    id: str
    file: str
    target: str = "loss"
    make: str | None = "make_loss"
    per_call: bool = False
    function: str = ""
    count: int = 0
    factory_file: str | None = None
    scales: bool = True
    multiple: int = 1
    skip: dict[str, str] = field(default_factory=dict)
    tpu: bool = False
    app_compiled: bool = False
    refused: str = ""
    known: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return self.file if os.path.isabs(self.file) else os.path.join(MODELS_DIR, self.file)

    @property
    def spec(self) -> str:
        """What the CLI opens."""
        return f"{self.path}:{self.target}"

    @property
    def sites(self) -> tuple[str, ...]:
        """The checkpointed function of each site, in site-id order."""
        return (self.function,) * self.count

    def target_fn(self) -> Callable:
        """The registered target's function, as the file defines it."""
        return getattr(load_module(self.path), self.target)

    def written(self) -> tuple:
        """The policy the file writes at each site (the factory module's
        WRITTEN: one policy, a function of the site's index, or a dict of
        them by target)."""
        if not self.count:
            return ()
        written = load_module(self.factory_file or self.path).WRITTEN
        if isinstance(written, dict):
            return written[self.target]
        if self.per_call:
            return tuple(written(i) for i in range(self.count))
        return (written,) * self.count

    def build(self, per_site: tuple) -> Callable:
        """The function with `per_site[i]` the policy of site i + 1."""
        if not self.count:
            return self.target_fn()
        if self.make is None:
            raise NotBuildable(f"{self.id}: no factory for its sites")
        make = getattr(load_module(self.factory_file or self.path), self.make)
        if self.per_call:
            return make(lambda i: per_site[i])
        (policy,) = per_site
        return make(policy)


class NotBuildable(Exception):
    """A configuration the model's factory cannot build by hand."""


@cache
def load_module(path: str) -> ModuleType:
    """A model file imported by its path, once (its targets register nowhere:
    `remat_tui.target` only returns the function outside the loader)."""
    return import_as("zoo_" + os.path.splitext(os.path.basename(path))[0], path)


def import_as(name: str, path: str) -> ModuleType:
    """The file at `path` imported as the module `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


NOTEBOOK = os.path.abspath(os.path.join(HERE, "..", "..", "examples", "notebook.py"))
NOTEBOOK_SITES = os.path.join(HERE, "notebook_sites.py")


def _seed(target: str, function: str = "", count: int = 0, **kw) -> Model:
    """A target of examples/notebook.py: its args take no batch (fit refuses it)."""
    return Model(f"seed-{target}", NOTEBOOK, target, f"make_{target}" if count else None,
                 True, function, count, NOTEBOOK_SITES, scales=False, **kw)  # fmt: skip


# fmt: off
# A scalar constant outside the checkpoint that JAX saves as a residual
# ("f32[] from a literal": here the loss's `/ x.shape[0]`) is missing from
# the residual list under a site override: the override re-evaluates JAX's
# traced program, where a Python scalar JAX made an array and a NumPy scalar
# look alike, and JAX saves only the first (docs/guide/targets.md, Limits).
LITERAL_UNDER_OVERRIDE = "a literal residual outside the site is missing under an override"

MODELS = [
    _seed("f"),
    _seed("f2", "g", 3, app_compiled=True),
    _seed("f3", "f", 1),
    _seed("f4", "f4_layers", 1),
    _seed("loss"),
    _seed("chain"),
    _seed("recursive", "<lambda>", 3),
    Model("loop", "loops.py", "loop", "make_loop", True, "layer", 3, tpu=True, app_compiled=True),
    Model("block-list", "loops.py", "block_list", "make_block_list", True, "block", 3),
    Model("linen-list", "linen_list.py", per_call=True, function="Block.__call__", count=3),
    Model("linen-scan", "linen_scan.py", function="Block.__call__", count=1),
    Model("nnx-scan", "nnx_scan.py", function="forward", count=1, app_compiled=True),
    Model("eqx-loop", "eqx_loop.py", per_call=True, function="Layer.__call__", count=3),
    Model("maxtext", "maxtext_decoder.py", function="decoder_layer", count=1, tpu=True),
    # Its residual budget is per device now (Contract 17), and the answer
    # within it the outer nothing_saveable: the override that met
    # LITERAL_UNDER_OVERRIDE is no longer the answer (the defect is not fixed).
    Model("shard-map", "shard_map_block.py", function="block", count=1, multiple=4),
    Model("complex-rope", "complex_rope.py", function="attention", count=1, app_compiled=True,
          refused="reduce_precision does not accept dtype complex64"),
    Model("custom-vjp", "custom_vjp_kernel.py", function="block", count=1),
    Model("mesh", "mesh_model.py", per_call=True, function="mlp", count=2, multiple=2),
    Model("fsdp", "fsdp_decoder.py", function="decoder_layer", count=1, multiple=4,
          refused="reduce_precision does not accept dtype complex64"),
]
# fmt: on
BY_ID = {m.id: m for m in MODELS}
