"""Provides the library call that applies a checkpoint site in the user's
code (`nn.remat(...)`, `nnx.remat(...)`, `eqx.filter_checkpoint(...)`), read
from their source, and the code to change there for another policy.

JAX binds such a checkpoint where the wrapped function runs (inside
`nn.scan`, say), not where the user wrote the wrapper and its policy, and no
traceback holds that line. It is read from the source of the function that
runs the site: a call of the library's wrapper whose first argument is the
checkpointed function, else the only call of it there that could be; failing
that, in the functions around it, then in the whole file.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from functools import lru_cache

from remat_tui.core.model import Site, Source, Wrapper
from remat_tui.core.runtime.usercode import in_library
from remat_tui.core.setup import policies
from remat_tui.core.trace import written_checkpoints

# (the folders of a library's files, the names its checkpoint wrappers go by)
_LIBRARIES = (
    (("flax", "nnx"), ("remat",)),
    (("flax", "linen"), ("remat", "checkpoint", "remat_scan")),
    (("flax", "core"), ("remat", "checkpoint", "remat_scan")),  # Linen's lifted transforms
    (("equinox",), ("filter_checkpoint",)),
)
_PARTIAL = ("partial", "functools.partial")
_POLICIES = ("jax.checkpoint_policies", "checkpoint_policies")


def wrapper_names(calling_file: str | None) -> tuple[str, ...]:
    """The names of the wrappers of the library whose file binds a checkpoint
    (the innermost frame outside JAX behind the remat equation); () where the
    user's own code binds it (`jax.checkpoint`)."""
    if not calling_file or not in_library(calling_file):
        return ()
    parts = calling_file.split(os.sep)
    for folders, names in _LIBRARIES:
        n = len(folders)
        if any(tuple(parts[i : i + n]) == folders for i in range(len(parts) - n + 1)):
            return names
    return ()


@dataclass(frozen=True)
class _Call:
    """A wrapper call found in a file."""

    line: int
    column: int
    function: str  # the qualified name of the def it is in, or "<module>"
    wrapper: Wrapper
    wrapped_name: str | None  # the last name of what it wraps: `Block`, `lin` of `self.lin`


def find_wrapper(
    names: tuple[str, ...], called_at: Source, function: str
) -> tuple[Source, Wrapper] | None:
    """(the wrapper call's line, the Wrapper) for a site of `function` run at
    `called_at`, applied by a wrapper of one of `names`; None when the source
    cannot be read or does not say which call it is."""
    if not names:
        return None
    index = _index(called_at.file, written_checkpoints.mtime(called_at.file), names)
    if index is None:
        return None
    calls, scopes, defined = index
    wanted = _wanted(function)
    for first, last in [s for s in scopes if s[0] <= called_at.line <= s[1]] + [(1, 1 << 30)]:
        inside = [c for c in calls if first <= c.line <= last]
        chosen = _choose(inside, wanted, defined, called_at.line)
        if chosen is not None:
            where = Source(called_at.file, chosen.line, chosen.column, chosen.function)
            return where, chosen.wrapper
    return None


def _wanted(function: str) -> str:
    """The name a wrapper's first argument has for this checkpointed function:
    `Block` for `Block.__call__`, `step` for `f.<locals>.step`."""
    parts = [p for p in function.split(".") if p != "<locals>"]
    if len(parts) > 1 and parts[-1] == "__call__":
        return parts[-2]
    return parts[-1] if parts else function


def _choose(calls: list[_Call], wanted: str, defined: set[str], line: int) -> _Call | None:
    named = [c for c in calls if c.wrapped_name == wanted]
    if named:
        before = [c for c in named if c.line <= line]
        return before[-1] if before else named[0]
    # A call wrapping something else this file defines is another site's.
    could = [c for c in calls if c.wrapped_name is None or c.wrapped_name not in defined]
    return could[0] if len(could) == 1 else None


@lru_cache(maxsize=32)
def _index(path: str, mtime: float | None, names: tuple[str, ...]) -> tuple[list, list, set] | None:
    """(the wrapper calls in the file, the line spans of its defs, the names it
    defines), or None when it cannot be read or parsed. Keyed on the file's
    modification time, so an edited file is read again."""
    if mtime is None:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        tree = ast.parse(text)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    finder = _Finder(text, tree, names)
    finder.visit(tree)
    scopes = sorted(finder.scopes, key=lambda s: s[1] - s[0])  # innermost first
    return finder.calls, scopes, finder.defined


class _Finder(ast.NodeVisitor):
    """Collects the wrapper calls (plain, curried and as decorators), with the
    def each is in."""

    def __init__(self, text: str, tree: ast.Module, names: tuple[str, ...]):
        self.text, self.names = text, names
        self.calls: list[_Call] = []
        self.scopes: list[tuple[int, int]] = []
        self.defined: set[str] = set()
        self._stack: list[tuple[str, int, int]] = []  # (name, first line, last line)
        self._seen: set[int] = set()
        self._policies = _POLICIES + _aliases(tree)
        # name = getattr(jax.checkpoint_policies, ...): a policy= argument may name one
        self._policy_assigns = [
            n for n in ast.walk(tree) if isinstance(n, ast.Assign) and self._config(n.value)
        ]

    def _def(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.defined.add(node.name)
        if not isinstance(node, ast.ClassDef):
            self.scopes.append((node.lineno, node.end_lineno or node.lineno))
        for deco in node.decorator_list:
            self._decorator(deco, node.name)
        self._stack.append((node.name, node.lineno, node.end_lineno or node.lineno))
        self.generic_visit(node)
        self._stack.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _def

    def visit_Call(self, node: ast.Call) -> None:
        if id(node) not in self._seen:
            if self._is_wrapper(node.func):
                self._add(node, node, _first_arg(node))
            elif (
                isinstance(node.func, ast.Call)
                and self._is_wrapper(node.func.func)
                and _first_arg(node.func) is None
            ):
                # nnx.remat(policy=...)(f): the inner call holds the policy
                self._seen.add(id(node.func))
                self._add(node, node.func, _first_arg(node))
            elif _text(node.func) in _PARTIAL and node.args and self._is_wrapper(node.args[0]):
                self._add(node, node, node.args[1] if len(node.args) > 1 else None)
        self.generic_visit(node)

    def _decorator(self, deco: ast.expr, def_name: str) -> None:
        target = ast.Name(def_name)
        if self._is_wrapper(deco):  # @eqx.filter_checkpoint
            self._add(deco, None, target)
        elif isinstance(deco, ast.Call):
            self._seen.add(id(deco))
            if self._is_wrapper(deco.func) and not deco.args:  # @nnx.remat(policy=...)
                self._add(deco, deco, target)
            elif _text(deco.func) in _PARTIAL and deco.args and self._is_wrapper(deco.args[0]):
                self._add(deco, deco, target)

    def _is_wrapper(self, func: ast.expr) -> bool:
        text = _text(func)
        head, _, last = text.rpartition(".")
        return last in self.names and not (head == "jax" or head.startswith("jax."))

    def _add(self, node: ast.expr, holder: ast.Call | None, wrapped: ast.expr | None) -> None:
        keyword = next((k for k in holder.keywords if k.arg == "policy"), None) if holder else None
        policy = self._segment(keyword.value) if keyword else None
        policy_line = keyword.value.lineno if keyword else node.lineno
        config = self._config(keyword.value) if keyword else None
        if keyword is not None and config is None and isinstance(keyword.value, ast.Name):
            assigned = self._assigned(keyword.value.id, node.lineno)
            if assigned is not None:  # policy = getattr(jax.checkpoint_policies, ...)
                policy, policy_line = self._segment(assigned), assigned.lineno
                config = self._config(assigned)
        if holder is None:
            call = _text(node)  # a bare decorator
        elif _text(holder.func) in _PARTIAL:
            call = _text(holder.args[0])
        else:
            call = _text(holder.func)
        written = self._segment(wrapped) if wrapped else None
        wrapper = Wrapper(call, written, policy, policy_line, config)
        function = ".".join(name for name, _, _ in self._stack) or "<module>"
        name = _last_name(wrapped)
        self.calls.append(_Call(node.lineno, node.col_offset + 1, function, wrapper, name))

    def _assigned(self, name: str, before: int) -> ast.expr | None:
        """The last getattr of jax.checkpoint_policies assigned to `name`
        before line `before`, in the def the call is in."""
        first, last = self._stack[-1][1:] if self._stack else (1, before)
        found = [
            n.value
            for n in self._policy_assigns
            if first <= n.lineno < before <= last
            and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
        ]
        return max(found, key=lambda v: v.lineno) if found else None

    def _config(self, value: ast.expr) -> str | None:
        """X in `getattr(jax.checkpoint_policies, X[, default])`, as written."""
        if (
            isinstance(value, ast.Call)
            and _text(value.func) == "getattr"
            and len(value.args) >= 2
            and _text(value.args[0]) in self._policies
        ):
            return ast.unparse(value.args[1])
        return None

    def _segment(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ast.unparse(node)


def _first_arg(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg in ("target", "f", "fun")), None)


def _last_name(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _aliases(tree: ast.Module) -> tuple[str, ...]:
    """Other names the file gives jax.checkpoint_policies at its top level
    (`CP = jax.checkpoint_policies`, `from jax import checkpoint_policies as cp`)."""
    names = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and _text(node.value) in _POLICIES:
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.ImportFrom) and node.module == "jax":
            names += [a.asname for a in node.names if a.name == "checkpoint_policies" and a.asname]
    return tuple(names)


def _text(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # a node ast.unparse cannot print: not a wrapper's name
        return ""


def site_code(site: Site, spec: policies.PolicySpec) -> tuple[str, str, str]:
    """What to paste at `site` for the policy `spec`: (where, a note on what
    to change there, the code). At a library's wrapper: its `policy=`
    argument, or the config string it reads; at a `jax.checkpoint`: the call
    with the new policy."""
    # No line of the user's when the checkpoint is applied outside their code
    # (a decorator of remat-tui's wrapping a jax.checkpoint, say).
    where = site.source.where() if site.source else "line not known"
    w = site.wrapper
    if w is None:
        # What the line checkpoints, as written (`sharded`, a shard_map of `block`).
        written = written_checkpoints.checkpointed_at(site.source) or site.function
        if spec.kind == policies.AS_WRITTEN:
            return where, "", f"{written}  # call it directly: no jax.checkpoint"
        return where, "", spec.python(written, site.keywords)
    shown = f"{w.call}({w.wrapped}, ...)" if w.wrapped else f"{w.call}(...)"
    at = f"line {w.policy_line}"
    if spec.kind == policies.AS_WRITTEN:
        plain = w.wrapped or "the function it wraps"
        return where, f" {shown}: remove the {w.call}", f"{plain}  # no checkpoint"
    if w.config is not None and _plain_name(spec):
        now = f", now {site.policy!r}" if site.policy.isidentifier() else ""
        note = f" {shown} reads its policy's name from the config string {w.config} ({at}{now})"
        return where, note, _setting(w.config, spec.canonical)
    if w.config is not None:
        note = f" {shown}: no config string names this policy; put it in place of {w.policy} ({at})"
    elif w.policy is None:
        note = f" {shown} passes no policy: add one ({at})"
    else:
        note = f" {shown}: change its policy= ({at})"
    return where, note, f"policy={spec.expression()}"


def _plain_name(spec: policies.PolicySpec) -> bool:
    """Whether `getattr(jax.checkpoint_policies, name)` can give this policy."""
    return not spec.declared and spec.canonical.isidentifier()


def _setting(config: str, name: str) -> str:
    """The config string set to `name`: `remat_policy="dots_saveable"` for
    `self.remat_policy`; the literal itself where the getattr names one."""
    try:
        node = ast.parse(config, mode="eval").body
    except SyntaxError:
        return repr(name)
    if isinstance(node, ast.Constant):
        return repr(name)
    last = _last_name(node)
    return f"{last}={name!r}" if last else repr(name)
