"""Provides the Linen form of a structure's code (Contract 15, issue 32 item
3) for a scan Linen's nn.scan made: `linen_code`, the call of a Linen helper
(linen_helpers.py: `nested_nn_scan`, `split_nn_scan`) in place of the
target's own nn.scan, with the one line that moves its existing parameters
to the new layout (stored_layout.py's `conversion`, which verify evaluates
too), and `linen_helper_source`, the helper's text.

The helpers build, with Linen's lifted nn.scan and nn.remat, the program
structure_code.py's `nested_scan` / `split_scan` make at the JAX level,
which is what remat-tui traces, analyses and compiles for the structure
(tests/unit/test_structures_linen.py compiles the printed text and checks).
The nn.scan's own arguments are read from the user's source
(`trace.linen_call`); what cannot be read is named for the user to copy.
"""

from __future__ import annotations

import ast
import os
from typing import TYPE_CHECKING

from remat_tui.core.setup import policies
from remat_tui.core.setup.structure_specs import HELPER_MARK, NESTED, Structure
from remat_tui.core.trace import stored_layout
from remat_tui.core.trace.linen_call import ScanCall

if TYPE_CHECKING:
    from remat_tui.core.trace.found_scan import FoundScan

HELPERS = os.path.join(os.path.dirname(__file__), "linen_helpers.py")


def linen_helper_source(structure: Structure) -> str:
    """The Linen helper's definition, with the imports it needs, after
    HELPER_MARK: read from linen_helpers.py's text (importing it would
    import Flax)."""
    imports = "import flax.linen as nn\nimport jax"
    name = "nested_nn_scan"
    if structure.kind != NESTED:
        imports, name = f"{imports}\nimport jax.numpy as jnp", "split_nn_scan"
    with open(HELPERS, encoding="utf-8") as fh:
        text = fh.read()
    (helper,) = [
        node for node in ast.parse(text).body
        if isinstance(node, ast.FunctionDef) and node.name == name
    ]  # fmt: skip
    return f"{HELPER_MARK}\n{imports}\n\n\n{ast.get_source_segment(text, helper)}"


def linen_code(scan: FoundScan, structure: Structure, call: ScanCall | None) -> tuple[str, str]:
    """What to write for `structure` on `scan` (a FoundScan made by Linen's
    nn.scan), given the user's nn.scan call (linen_call.ScanCall, or None
    where the source does not say): (the lines that replace the nn.scan and
    move the parameters, the helper they call)."""
    where = scan.source.where() if scan.source else "the nn.scan"
    n, k = scan.length, structure.count
    if structure.kind == NESTED:
        head = f"# {where}: its nn.scan of {n} layers as {k} groups of {n // k}, each checkpointed."
    else:
        head = (
            f"# {where}: its nn.scan of {n} layers, the first {k} under "
            f"{structure.parts[0].canonical}, the other {n - k} under "
            f"{structure.parts[1].canonical}."
        )
    if call is None:
        return "\n".join([head, *_unread(scan, structure, where)]), linen_helper_source(structure)
    kwargs = {key: value for key, value in call.kwargs.items() if key != "length"}
    length = call.kwargs.get("length", str(n))
    scanned = "" if call.name is None else f"['{call.name}']"
    if structure.kind == NESTED:
        static = (call.remat or ("", "", {}))[2].get("static_argnums")
        extra = {"static_argnums": static} if static else {}
        args = [call.block if call.remat is None else _remat(call, None), f"groups={k}"]
        made = _call("nested_nn_scan", args, {"length": length, **extra, **kwargs, **_cse(scan)})
        moved = [
            f"# Its parameters go from [{n}, ...] to [{k}, {n // k}, ...], one level down (under",
            f"# 'layers'). A stored tree, with scanned = params[...]{scanned}, converts by",
            f"#     scanned = {stored_layout.conversion(structure, n)}",
        ]
    else:
        blocks = [_block_under(call, spec) for spec in structure.parts]
        made = _call("split_nn_scan", [*blocks, f"first={k}"], {"length": length, **kwargs})
        moved = [
            f"# Its parameters split in two, one level down: [:{k}] under 'first', [{k}:] under",
            f"# 'rest'. A stored tree, with scanned = params[...]{scanned}, converts by",
            f"#     scanned = {stored_layout.conversion(structure, n)}",
        ]
    file = scan.source.where().split(":")[0] if scan.source else "the file"
    assigned = f"{call.assigned} = " if call.assigned else ""
    lines = [head, f"# At {file}:{call.line}, in place of its nn.scan(...):", assigned + made]
    return "\n".join([*lines, *moved]), linen_helper_source(structure)


def _cse(scan: FoundScan) -> dict[str, str]:
    """The groups' nn.remat keeps the prevent_cse of the user's checkpoint,
    as the nested_scan remat-tui traces for it does; nothing for JAX's default."""
    return {} if scan.prevent_cse else {"prevent_cse": "False"}


def _call(function: str, args: list[str], kwargs: dict[str, str]) -> str:
    return f"{function}({', '.join([*args, *(f'{k}={v}' for k, v in kwargs.items())])})"


def _remat(call: ScanCall, policy: str | None) -> str:
    """The call's nn.remat(CLASS, ...) on one line, its policy= replaced
    by `policy` where one is given."""
    assert call.remat is not None  # asked only of a call that has one
    function, block, kwargs = call.remat
    if policy is not None:
        kwargs = {**kwargs, "policy": policy}
    return _call(function, [block], kwargs)


def _block_under(call: ScanCall, spec: policies.PolicySpec) -> str:
    """The block the nn.scan scans, under `spec`'s policy."""
    if spec.kind == policies.AS_WRITTEN:
        return call.block if call.remat is None else _remat(call, None)
    if call.remat is None:
        return f"nn.remat({call.block}, policy={spec.expression()})"
    return _remat(call, spec.expression())


def _unread(scan: FoundScan, structure: Structure, where: str) -> list[str]:
    """The call to write where the user's nn.scan call could not be read:
    what to copy from it, named."""
    n, k = scan.length, structure.count
    if structure.kind == NESTED:
        made = f"nested_nn_scan(BLOCK, groups={k}, length={n}, **SCAN_KWARGS)"
        move = f"# Its parameters go from [{n}, ...] to [{k}, {n // k}, ...], under 'layers'."
    else:
        policy_first, policy_rest = (part.canonical for part in structure.parts)
        made = f"split_nn_scan(BLOCK_FIRST, BLOCK_REST, first={k}, length={n}, **SCAN_KWARGS)"
        move = (
            f"# BLOCK_FIRST, BLOCK_REST: BLOCK under nn.remat(..., policy=) {policy_first}, "
            f"{policy_rest}.\n# Its parameters split: [:{k}] under 'first', [{k}:] under 'rest'."
        )
    return [
        f"# In place of the nn.scan(BLOCK, ...) whose module is called at {where}",
        "# (that call could not be read here):",
        made,
        "# BLOCK: the module class it scans (e.g. nn.remat(Block, policy=...)); SCAN_KWARGS:",
        "# your nn.scan's arguments but length (variable_axes, split_rngs, in_axes...);",
        "# for nested, static_argnums= and prevent_cse=: your nn.remat's, if it has them.",
        move,
    ]
