"""Provides structure specs (Contract 15): `nested(G)` and `split(K, a, b)`,
parsed with `ast` like policy specs, with one canonical spelling.

- `nested(G)`: the scan of N layers run as G checkpointed groups of N/G (a
  scan over the groups whose body, under `jax.checkpoint`, scans the layers
  of one group): about G + N/G carries kept instead of N, for one more
  forward pass over the layers. G divides N.
- `split(K, a, b)`: the first K layers under policy a, the other N - K under
  policy b: two scans. A policy is that of the layer's own checkpoint (the
  one the scan's body applies), or, where the body applies none, of a
  checkpoint around it; `as_written` leaves the layer as the code has it.

Both take `scan=I` when the program has several scans (I: the scan's id,
counted in program order; 1 by default). `trace.rebuilt_scans` builds them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from remat_tui.core.setup import policies
from remat_tui.errors import RematError

NESTED, SPLIT = "nested", "split"
# Where a structure's code to write ends and the helper it calls begins
# (`trace.structure_code` writes it; a table's panel cuts there).
HELPER_MARK = "# The helper, defined once:"
EXAMPLES = "e.g. nested(4) or split(8, everything_saveable, nothing_saveable)"


@dataclass(frozen=True)
class Structure:
    """A scan rebuilt: `nested` (into `count` checkpointed groups) or `split`
    (its first `count` layers under `first`, the rest under `rest`)."""

    kind: str  # NESTED | SPLIT
    count: int  # nested: the groups G; split: the layers K under `first`
    first: policies.PolicySpec | None = None  # split only
    rest: policies.PolicySpec | None = None  # split only
    scan: int = 1  # which scan of the program: its id, in program order

    @property
    def parts(self) -> tuple[policies.PolicySpec, policies.PolicySpec]:
        """A split's two policies: (first, rest)."""
        if self.first is None or self.rest is None:
            raise ValueError(f"{self.kind}({self.count}) is no split: it has no policies")
        return self.first, self.rest

    @property
    def canonical(self) -> str:
        """The one spelling: what reports print and the cache key's part."""
        args = [str(self.count)]
        if self.kind == SPLIT:
            args += [part.canonical for part in self.parts]
        if self.scan != 1:
            args.append(f"scan={self.scan}")
        return f"{self.kind}({', '.join(args)})"

    def __str__(self) -> str:
        return self.canonical

    def to_dict(self) -> dict:
        """The `structure` key of a row or an analysis (JSON)."""
        out = {"spec": self.canonical, "kind": self.kind, "scan": self.scan}
        if self.kind == NESTED:
            out["groups"] = self.count
        else:
            first, rest = self.parts
            out.update(first=self.count, policy_first=first.canonical, policy_rest=rest.canonical)
        return out


def nested(groups: int, scan: int = 1) -> Structure:
    return Structure(NESTED, groups, scan=scan)


def split(
    first: int, policy_first: policies.PolicySpec, policy_rest: policies.PolicySpec, scan: int = 1
) -> Structure:
    return Structure(SPLIT, first, policy_first, policy_rest, scan)


def parse(text: str | Structure, declared: dict[str, Callable] | None = None) -> Structure:
    """A structure spec as a user types it (`nested(4)`, `split(8,
    dots_saveable, nothing_saveable, scan=2)`); a bad one raises RematError
    saying what was expected."""
    if isinstance(text, Structure):
        return text
    source = text.strip()
    try:
        node = ast.parse(source, mode="eval").body
    except SyntaxError as exc:
        raise RematError(
            f"could not parse structure {text!r}: {exc.msg}; expected {EXAMPLES}."
        ) from None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        raise RematError(f"structure {text!r}: expected {EXAMPLES}.")
    kind = node.func.id
    if kind not in (NESTED, SPLIT):
        raise RematError(f"structure {text!r}: unknown {kind!r}; expected {EXAMPLES}.")
    scan = 1
    for kw in node.keywords:
        if kw.arg != "scan":
            raise RematError(f"structure {text!r}: unknown keyword {kw.arg!r}; only scan=I.")
        scan = _positive(kw.value, text, "scan=")
    wanted = 1 if kind == NESTED else 3
    if len(node.args) != wanted:
        usage = "nested(G)" if kind == NESTED else "split(K, policy_first, policy_rest)"
        raise RematError(
            f"structure {text!r}: {kind} takes {wanted} argument{'s' * (wanted > 1)}: {usage}."
        )
    count = _positive(node.args[0], text, "the first argument")
    if kind == NESTED:
        return Structure(NESTED, count, scan=scan)
    specs = []
    for arg in node.args[1:]:
        try:
            written = ast.get_source_segment(source, arg)
            assert written is not None  # `arg` was parsed from `source`
            specs.append(policies.parse(written, declared))
        except RematError as exc:
            raise RematError(f"structure {text!r}: {exc.message}") from None
    return Structure(SPLIT, count, specs[0], specs[1], scan)


def without_helper(python: str) -> str:
    """A snippet with its structure helper's definition left out (a table's
    panel has no room for it; the report and an export have it whole)."""
    head, mark, _ = python.partition(HELPER_MARK)
    return head.rstrip() + ("\n# (then the helper's definition: in the report)" if mark else "")


def _positive(node: ast.AST, text: str, what: str) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value > 0:
        return node.value
    raise RematError(f"structure {text!r}: {what} must be a positive whole number.")
