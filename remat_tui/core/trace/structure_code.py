"""Provides the code to write for a structure (Contract 15): `nested_scan` and
`split_scan`, plain JAX the user pastes, and `code_for`, which prints the one
a structure needs with where and how to call it (for a scan Linen's nn.scan
made, the Linen form: structure_code_flax.py).

The helpers are the code `trace.rebuilt_scans` traces to build a
structure, so what remat-tui reports of a structure is what this code
compiles to (tests/unit/test_structures_code.py runs the printed text).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from remat_tui.core.setup import policies
from remat_tui.core.setup.structure_specs import HELPER_MARK, NESTED, SPLIT, Structure
from remat_tui.core.trace.linen_call import read_scan_call
from remat_tui.core.trace.structure_code_flax import linen_code

if TYPE_CHECKING:
    from remat_tui.core.trace.found_scan import FoundScan


def nested_scan(f, init, xs, groups, length=None, prevent_cse=True):
    """jax.lax.scan(f, init, xs, length) run as `groups` checkpointed groups
    of length // groups layers: about groups + length // groups carries kept
    instead of length, for one more forward pass over the layers. Each group
    is checkpointed with `prevent_cse` (pass your checkpoint's). A stacked
    array sharded over a mesh keeps its sharding: the layer axes unsharded,
    every other axis as it was."""
    if length is None:
        length = jax.tree.leaves(xs)[0].shape[0]
    per_group = length // groups

    def relayered(x, layers, old):
        """x with its `old` leading (layer) axes made `layers`."""
        shape, spec = (*layers, *x.shape[old:]), tuple(jax.typeof(x).sharding.spec)
        if not any(spec):  # not sharded: a plain reshape
            return x.reshape(shape)
        kept = P(*(None,) * len(layers), *spec[old:])  # the layer axes unsharded
        out_sharding = NamedSharding(jax.typeof(x).sharding.mesh, kept)
        return jnp.reshape(x, shape, out_sharding=out_sharding)

    def group(carry, group_xs):
        return jax.lax.scan(f, carry, group_xs, length=per_group)

    grouped = jax.tree.map(lambda x: relayered(x, (groups, per_group), 1), xs)
    checkpointed = jax.checkpoint(group, prevent_cse=prevent_cse)
    carry, ys = jax.lax.scan(checkpointed, init, grouped, length=groups)
    return carry, jax.tree.map(lambda y: relayered(y, (length,), 2), ys)


def split_scan(step_first, step_rest, init, xs, first, length=None):
    """jax.lax.scan(step, init, xs, length) whose first `first` layers run
    step_first and the others step_rest: the same step under two checkpoint
    policies. A slice of a stacked array keeps the array's sharding."""
    if length is None:
        length = jax.tree.leaves(xs)[0].shape[0]
    head = jax.tree.map(lambda x: x[:first], xs)
    tail = jax.tree.map(lambda x: x[first:], xs)
    carry, ys_head = jax.lax.scan(step_first, init, head, length=first)
    carry, ys_tail = jax.lax.scan(step_rest, carry, tail, length=length - first)
    return carry, jax.tree.map(lambda a, b: jnp.concatenate([a, b]), ys_head, ys_tail)


IMPORTS = {
    NESTED: "import jax\nimport jax.numpy as jnp\nfrom jax.sharding import NamedSharding\n"
    "from jax.sharding import PartitionSpec as P",
    SPLIT: "import jax\nimport jax.numpy as jnp",
}


def helper_source(structure: Structure) -> str:
    """The helper's definition, with the imports it needs, after HELPER_MARK."""
    helper = nested_scan if structure.kind == NESTED else split_scan
    source = inspect.getsource(helper).rstrip()
    return f"{HELPER_MARK}\n{IMPORTS[structure.kind]}\n\n\n{source}"


def code_for(scan: FoundScan, structure: Structure) -> tuple[str, str]:
    """What to write for `structure` on `scan` (a structures.FoundScan):
    (where and the call that replaces the scan's, the helper it calls).
    `step` stands for what the code passes jax.lax.scan, said in words.
    A scan Linen's nn.scan made gets the Linen form (structure_code_flax.py)."""
    if scan.library == "flax.linen":
        return linen_code(scan, structure, read_scan_call(scan.source))
    where = scan.source.where() if scan.source else "the scan"
    n, k = scan.length, structure.count
    calls = f"# Where the code calls jax.lax.scan(step, init, xs), step being {_step(scan)}:"
    if scan.library == "flax.nnx":
        calls = f"# For a jax.lax.scan(step, init, xs) of {scan.function} (the scan is nnx.scan):"
    if structure.kind == NESTED:
        head = [
            f"# {where}: its scan of {n} layers as {k} checkpointed groups of {n // k}.",
            calls,
            f"#     carry, ys = nested_scan(step, init, xs, groups={k}{_keywords(scan)})",
        ]
    else:
        head = [
            f"# {where}: its scan of {n} layers, the first {k} under "
            f"{structure.parts[0].canonical}, the other {n - k} under "
            f"{structure.parts[1].canonical}.",
            calls,
            f"#     carry, ys = split_scan(step_first, step_rest, init, xs, first={k})",
            *_split_steps(scan, structure),
        ]
    return "\n".join([*head, *_within_note(scan), *_library_note(scan)]), helper_source(structure)


def _step(scan: FoundScan) -> str:
    """The scan's step in words: the function, checkpointed or holding a checkpoint."""
    if scan.checkpointed and scan.checkpoint_function == scan.function:
        return f"jax.checkpoint({scan.function}, ...)"
    if scan.checkpointed:
        return f"{scan.function}, which calls jax.checkpoint of {scan.checkpoint_function}"
    return scan.function


def _split_steps(scan: FoundScan, structure: Structure) -> list[str]:
    """Lines saying what each of split_scan's two steps is: the scan's step
    with its checkpoint's policy changed (or a checkpoint put around it,
    where it applies none); `with NAME = EXPRESSION` where it can be
    written as one."""
    lines = []
    for name, part in zip(("step_first", "step_rest"), structure.parts, strict=True):
        spec: policies.PolicySpec | None = part
        written = part.kind == policies.AS_WRITTEN
        if written and not scan.checkpointed:
            lines.append(f"# with {name} = {scan.function}  (as written)")
            continue
        if written:
            spec = scan.checkpoint_spec
        note = "  (as written)" if written else ""
        if spec is None:  # a policy of the code's own making
            lines.append(f"# with {name} = step as written (policy {scan.checkpoint_policy})")
        elif scan.checkpointed and scan.checkpoint_function != scan.function:
            lines.append(
                f"# with {name}: {scan.function} with its jax.checkpoint of "
                f"{scan.checkpoint_function} given policy={spec.expression()}"
                f"{_keywords(scan)}{note}"
            )
        else:  # the step is the checkpointed function, or applies no checkpoint
            target = scan.checkpoint_function or scan.function
            keywords = _keywords(scan) if scan.checkpointed else ""
            lines.append(
                f"# with {name} = jax.checkpoint({target}, policy={spec.expression()}"
                f"{keywords}){note}"
            )
    return lines


def _keywords(scan: FoundScan) -> str:
    """The keywords of the scan's checkpoint a rebuilt checkpoint keeps
    (`, prevent_cse=False` where the user wrote it; nothing for JAX's default)."""
    return "" if scan.prevent_cse else ", prevent_cse=False"


def _within_note(scan: FoundScan) -> list[str]:
    """Where the scan runs inside a shard_map body: the call goes there, where
    arrays are one device's (so the helper's plain reshape or slice applies)."""
    if scan.within:
        return [
            "# The scan runs inside a jax.shard_map body: make the call there, on the body's",
            "# local arrays (one device's), as the scan is called now.",
        ]
    return []


def _library_note(scan: FoundScan) -> list[str]:
    """Where nnx.scan made the loop: only the JAX form is printed. An nnx
    module holds its stacked state in place and nnx.scan's axes are often
    in a decorator away from the call, so there is no drop-in as for
    Linen's nn.scan: the state must be split out (nnx.split) to be
    regrouped or sliced, which is the JAX helper's xs."""
    if scan.library == "flax.nnx":
        return [
            "# Only the JAX form is printed: the nnx module holds its stacked state, which",
            "# a nested or split scan must regroup or slice. Call the helper on a pure step",
            "# (nnx.split the block; its stacked state goes in xs, as nnx.scan takes it,",
            "# and nnx.merge the block from it inside the step).",
        ]
    return []
