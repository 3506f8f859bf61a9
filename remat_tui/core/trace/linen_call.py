"""Provides `read_scan_call`: the user's own `nn.scan(...)` call for a
Linen scan, read from the source at the line where the scanned module is
called (`nn.scan(...)(...)(x)`, or `layers(...)(x)` with `layers = nn.scan(...)`
earlier in the same function), so the structure's Linen code
(structure_code_flax.py) can repeat its arguments rather than ask for them.
None where the source does not say (no file, another shape of code).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from remat_tui.core.model import Source

_SCANS = ("scan",)
_REMATS = ("remat", "checkpoint")


@dataclass(frozen=True)
class ScanCall:
    """The parts of a user's `nn.scan(BLOCK, **kwargs)(name=NAME, ...)` call."""

    line: int  # where nn.scan( is written
    assigned: str | None  # the variable the nn.scan is assigned to, if any
    block: str  # BLOCK as written, resolved through one assignment
    # BLOCK = nn.remat(CLASS, **kw): (nn.remat as written, CLASS, kw); else None
    remat: tuple[str, str, dict[str, str]] | None
    kwargs: dict[str, str]  # the nn.scan's keyword arguments as written, in order
    name: str | None  # the scanned module's name= where it is a string literal


def read_scan_call(source: Source | None) -> ScanCall | None:
    """The nn.scan call for a scan whose module is called at `source`
    (places.Source), or None where it cannot be read."""
    if source is None:
        return None
    try:
        with open(source.file, encoding="utf-8") as fh:
            text = fh.read()
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return None
    function = _innermost_function(tree, source.line)
    if function is None:
        return None
    called = _module_call_at(function, source.line)
    if called is None:
        return None
    made: ast.expr | None = called.func
    assigned = None
    if isinstance(made, ast.Name):
        assigned = made.id
        made = _assigned_before(function, made.id, source.line)
    if not (isinstance(made, ast.Call) and _called_name(made) in _SCANS and made.args):
        return None
    block = made.args[0]
    if isinstance(block, ast.Name):
        block = _assigned_before(function, block.id, made.lineno) or block
    remat = None
    if isinstance(block, ast.Call) and _called_name(block) in _REMATS and block.args:
        remat = (
            _segment(text, block.func),
            _segment(text, block.args[0]),
            _keywords(text, block),
        )
    name = next((k.value for k in called.keywords if k.arg == "name"), None)
    return ScanCall(
        line=made.lineno,
        assigned=assigned,
        block=_segment(text, block),
        remat=remat,
        kwargs=_keywords(text, made),
        name=name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None,
    )


def _innermost_function(
    tree: ast.Module, line: int
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    found = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                if found is None or node.lineno >= found.lineno:
                    found = node
    return found


def _module_call_at(function: ast.FunctionDef | ast.AsyncFunctionDef, line: int) -> ast.Call | None:
    """The outermost `MAKE(...)` of a `MAKE(...)(args)` call starting at `line`."""
    calls = [
        n for n in ast.walk(function)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Call) and n.lineno == line
    ]  # fmt: skip
    if not calls:
        return None
    outermost = min(calls, key=lambda n: n.col_offset).func
    return outermost if isinstance(outermost, ast.Call) else None  # it is: found so


def _assigned_before(
    function: ast.FunctionDef | ast.AsyncFunctionDef, name: str, line: int
) -> ast.expr | None:
    """The value last assigned to `name` above `line` in `function`."""
    value = None
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and node.lineno < line:
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if name in targets and (value is None or node.lineno > value.lineno):
                value = node.value
    return value


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _segment(text: str, node: ast.AST) -> str:
    """`node`'s source; a node parsed from `text` always has its place there."""
    return ast.get_source_segment(text, node) or ""


def _keywords(text: str, call: ast.Call) -> dict[str, str]:
    return {k.arg: _segment(text, k.value) for k in call.keywords if k.arg}
