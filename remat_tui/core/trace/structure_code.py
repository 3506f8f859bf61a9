"""Provides the code to write for a structure (Contract 15): `nested_scan` and
`split_scan`, plain JAX the user pastes, and `code_for`, which prints the one
a structure needs with where and how to call it (for a scan Linen's nn.scan
made, the Linen form: structure_code_flax.py).

The helpers are the code core/trace/structures.py traces to build a
structure, so what remat-tui reports of a structure is what this code
compiles to (tests/unit/test_structures_code.py runs the printed text).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

from remat_tui.core.setup import policies
from remat_tui.core.setup.structures import HELPER_MARK, NESTED, Structure
from remat_tui.core.trace.linen_call import read_scan_call
from remat_tui.core.trace.structure_code_flax import linen_code

if TYPE_CHECKING:
    from remat_tui.core.trace.found_scan import FoundScan


def nested_scan(f, init, xs, groups, length=None):
    """jax.lax.scan(f, init, xs, length) run as `groups` checkpointed groups
    of length // groups layers: about groups + length // groups carries kept
    instead of length, for one more forward pass over the layers."""
    if length is None:
        length = jax.tree.leaves(xs)[0].shape[0]
    per_group = length // groups

    def group(carry, group_xs):
        return jax.lax.scan(f, carry, group_xs, length=per_group)

    grouped = jax.tree.map(lambda x: x.reshape(groups, per_group, *x.shape[1:]), xs)
    carry, ys = jax.lax.scan(jax.checkpoint(group), init, grouped, length=groups)
    return carry, jax.tree.map(lambda y: y.reshape(length, *y.shape[2:]), ys)


def split_scan(step_first, step_rest, init, xs, first, length=None):
    """jax.lax.scan(step, init, xs, length) whose first `first` layers run
    step_first and the others step_rest: the same step under two checkpoint
    policies."""
    if length is None:
        length = jax.tree.leaves(xs)[0].shape[0]
    head = jax.tree.map(lambda x: x[:first], xs)
    tail = jax.tree.map(lambda x: x[first:], xs)
    carry, ys_head = jax.lax.scan(step_first, init, head, length=first)
    carry, ys_tail = jax.lax.scan(step_rest, carry, tail, length=length - first)
    return carry, jax.tree.map(lambda a, b: jnp.concatenate([a, b]), ys_head, ys_tail)


def helper_source(structure: Structure) -> str:
    """The helper's definition, with the imports it needs, after HELPER_MARK."""
    if structure.kind == NESTED:
        return f"{HELPER_MARK}\nimport jax\n\n\n{inspect.getsource(nested_scan).rstrip()}"
    source = inspect.getsource(split_scan).rstrip()
    return f"{HELPER_MARK}\nimport jax\nimport jax.numpy as jnp\n\n\n{source}"


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
            f"#     carry, ys = nested_scan(step, init, xs, groups={k})",
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
    return "\n".join([*head, *_library_note(scan)]), helper_source(structure)


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
                f"{scan.checkpoint_function} given policy={spec.expression()}{note}"
            )
        else:  # the step is the checkpointed function, or applies no checkpoint
            target = scan.checkpoint_function or scan.function
            lines.append(
                f"# with {name} = jax.checkpoint({target}, policy={spec.expression()}){note}"
            )
    return lines


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
