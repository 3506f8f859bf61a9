"""Provides policy specs (Contract 2) read and written: `parse` (the text a
user writes, parsed with `ast`, never `eval`, with "did you mean"), `build`
(the JAX policy a spec stands for) and `from_jax` (the spec of a policy
object found in a traced program). The spec itself, a `PolicySpec` whose
`canonical` spelling is the cache key and what reports print, is
`setup.policy_spec`'s; its names are re-exported here, where callers
look for them.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

from remat_tui.core.setup.policy_spec import (
    AS_WRITTEN,
    BOTH,
    BUILTINS,
    CALLABLE_FACTORIES,
    EVERYTHING,
    EXAMPLES,
    NAME_LISTS,
    NAMES_ONLY,
    NOTHING,
    OFFLOAD_DOTS,
    OFFLOAD_DST,
    OFFLOAD_KEYWORDS,
    OFFLOAD_NAMES,
    OFFLOAD_SRC,
    SIMPLE,
    PolicySpec,
    builtin_specs,
    candidate_specs,
    declared_specs,
    names_part,
    names_policy,
    same_decisions,
    sorted_unique,
    with_names,
)
from remat_tui.errors import RematError

if TYPE_CHECKING:
    from remat_tui.core.jaxcompat.policies import Policy

__all__ = [
    "AS_WRITTEN", "BOTH", "BUILTINS", "CALLABLE_FACTORIES", "EVERYTHING", "EXAMPLES", "NAME_LISTS",
    "NAMES_ONLY", "NOTHING", "OFFLOAD_DOTS", "OFFLOAD_DST", "OFFLOAD_KEYWORDS", "OFFLOAD_NAMES",
    "OFFLOAD_SRC", "SIMPLE", "AnyName", "PolicySpec", "build", "builtin_specs",
    "candidate_specs", "check_syntax", "declared_specs", "describe", "describe_jax",
    "did_you_mean", "from_jax", "names_part", "names_policy", "parse", "same_decisions",
    "with_names",
]  # fmt: skip


def as_spec(spec: str | PolicySpec, declared: dict[str, Callable] | None = None) -> PolicySpec:
    """A policy as the API and the CLI take it (text as a user types it, or a
    PolicySpec already parsed), parsed once, against `declared` (the
    target's own policies by name)."""
    return spec if isinstance(spec, PolicySpec) else parse(spec, declared)


def parse(text: str, declared: dict[str, Callable] | None = None) -> PolicySpec:
    """Parse a spec; `declared` are the target's own policies by name."""
    source = text.strip()
    for prefix in ("jax.checkpoint_policies.", "checkpoint_policies."):
        source = source.removeprefix(prefix)
    if not source:
        raise RematError(f"empty policy spec; expected a policy, {EXAMPLES}.")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise RematError(
            f"could not parse policy spec {text!r}: {exc.msg} at column "
            f"{exc.offset}; expected a policy, {EXAMPLES}."
        ) from None
    declared = {} if declared is None else declared
    try:
        return _Parser(source, declared).policy(tree.body)
    except RematError as exc:
        meant = _respelt(source, tree, declared)
        if meant is None:
            raise
        # Before the list of every policy, where a reader sees it first.
        head, listed, known = exc.message.partition("; expected one of")
        hint = f". Did you mean {meant.canonical}?"
        message = f"{head}{hint} Expected one of{known}" if listed else f"{exc.message}{hint[1:]}"
        raise RematError(message) from None


def did_you_mean(text: str, declared: dict[str, Callable] | None = None) -> PolicySpec | None:
    """`text` with each misspelt policy name or keyword replaced by the
    closest known one, if that gives a spec that parses; else None."""
    source = text.strip()
    for prefix in ("jax.checkpoint_policies.", "checkpoint_policies."):
        source = source.removeprefix(prefix)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError:
        return None
    return _respelt(source, tree, {} if declared is None else declared)


def _respelt(source: str, tree: ast.Expression, declared: dict) -> PolicySpec | None:
    """The spec `source` probably meant (difflib's closest known word for
    each unknown one), or None when no respelling parses. Every parse error
    goes through here, so the CLI, the API and the app all say "did you
    mean" alike."""
    known = [AS_WRITTEN, *SIMPLE, *CALLABLE_FACTORIES, *declared]
    edits = []  # (start, end, replacement) within `source`
    candidates: Sequence[str]
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in known:
            word, candidates = node.id, known
        elif isinstance(node, ast.keyword) and node.arg and node.arg not in OFFLOAD_KEYWORDS:
            word, candidates = node.arg, OFFLOAD_KEYWORDS
        else:
            continue
        close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.8)
        if close and node.lineno == 1:
            edits.append((node.col_offset, node.col_offset + len(word), close[0]))
    if not edits:
        return None
    for start, end, word in sorted(edits, reverse=True):
        source = source[:start] + word + source[end:]
    try:
        return _Parser(source, declared).policy(ast.parse(source, mode="eval").body)
    except (RematError, SyntaxError):
        return None


class AnyName(dict):
    """Stands in for a target's declared policies before the target is loaded."""

    def __contains__(self, name: object) -> bool:
        return True


def check_syntax(text: str) -> None:
    """Raise RematError if `text` cannot be a spec for any target (a bare name
    might be one the target declares, so those pass)."""
    parse(text, AnyName())


def build(spec: PolicySpec, declared: dict[str, Callable] | None = None) -> Policy | None:
    """The JAX policy callable for `spec` (None for as_written)."""
    import jax

    cp = jax.checkpoint_policies
    if spec.kind == AS_WRITTEN:
        return None
    if spec.declared:
        if declared is None or spec.kind not in declared:  # parse() makes none such
            raise KeyError(spec.kind)
        return declared[spec.kind]
    if spec.kind in NAME_LISTS:
        return getattr(cp, spec.kind)(*spec.names)
    if spec.kind == OFFLOAD_NAMES:
        return cp.save_and_offload_only_these_names(
            names_which_can_be_saved=list(spec.names),
            names_which_can_be_offloaded=list(spec.offloaded),
            offload_src=spec.src,
            offload_dst=spec.dst,
        )
    if spec.kind == OFFLOAD_DOTS:
        return cp.offload_dot_with_no_batch_dims(spec.src, spec.dst)
    if spec.kind == BOTH:
        return cp.save_from_both_policies(*(checkpoint_policy(p, declared) for p in spec.parts))
    return getattr(cp, spec.kind)


def checkpoint_policy(spec: PolicySpec, declared: dict[str, Callable] | None = None) -> Policy:
    """`build` for a spec that sets a policy: every kind but as_written, which
    sets none (it leaves the code's checkpoints as written, or removes one)."""
    policy = build(spec, declared)
    if policy is None:
        raise ValueError(f"{spec.canonical} sets no policy")
    return policy


class _Parser:
    def __init__(self, source: str, declared: dict[str, Callable]):
        self.source = source
        self.declared = declared

    def fail(self, node: ast.AST, what: str) -> NoReturn:
        col = getattr(node, "col_offset", 0) + 1
        raise RematError(f"policy spec {self.source!r}, column {col}: {what}")

    def policy(self, node: ast.AST) -> PolicySpec:
        if isinstance(node, ast.Name):
            return self.bare(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self.call(node)
        self.fail(node, f"expected a policy name or call, {EXAMPLES}.")

    def bare(self, node: ast.Name) -> PolicySpec:
        name = node.id
        if name == AS_WRITTEN or name in SIMPLE:
            return PolicySpec(SIMPLE.get(name, name))
        if name in self.declared:
            return PolicySpec(name, declared=True)
        if name in CALLABLE_FACTORIES:
            self.fail(node, f"{name} needs arguments, e.g. {name}(...).")
        self.fail(node, f"unknown policy {name!r}; expected one of {', '.join(self.known())}.")

    def known(self) -> list[str]:
        return [AS_WRITTEN, *SIMPLE, *CALLABLE_FACTORIES, *self.declared]

    def call(self, node: ast.Call) -> PolicySpec:
        name = _callee(node)
        if name in NAME_LISTS:
            self.no_keywords(node)
            return PolicySpec(name, names=sorted_unique([self.string(a) for a in node.args]))
        if name == OFFLOAD_NAMES:
            return self.offload_names(node)
        if name == OFFLOAD_DOTS:
            src, dst = self.src_dst(node)
            return PolicySpec(OFFLOAD_DOTS, src=src, dst=dst)
        if name == BOTH:
            self.no_keywords(node)
            if len(node.args) != 2:
                self.fail(node, f"{BOTH} takes exactly two policies.")
            parts = tuple(self.policy(a) for a in node.args)
            for arg, part in zip(node.args, parts, strict=True):
                if part.kind == AS_WRITTEN:
                    self.fail(
                        arg,
                        f"as_written is no policy (it means no jax.checkpoint), "
                        f"so {BOTH} cannot combine it.",
                    )
            return PolicySpec(BOTH, parts=parts)
        if name == AS_WRITTEN or name in SIMPLE or name in self.declared:
            self.fail(node, f"{name} takes no arguments; write it without parentheses.")
        self.fail(node.func, f"unknown policy {name!r}; expected one of {', '.join(self.known())}.")

    def offload_names(self, node: ast.Call) -> PolicySpec:
        if node.args:
            self.fail(node.args[0], f"{OFFLOAD_NAMES} takes keyword arguments only.")
        kw = {k.arg: k.value for k in node.keywords}
        allowed = set(OFFLOAD_KEYWORDS)
        for k in node.keywords:
            if k.arg not in allowed:
                self.fail(
                    k.value, f"unexpected keyword {k.arg!r}; expected {', '.join(sorted(allowed))}."
                )
        saved = sorted_unique(self.string_list(kw.get("names_which_can_be_saved")))
        offloaded = sorted_unique(self.string_list(kw.get("names_which_can_be_offloaded")))
        both = set(saved) & set(offloaded)
        if both:
            self.fail(
                node,
                f"names {sorted(both)} are both saved and offloaded; "
                "a name can be in only one list.",
            )
        src = self.memory(kw.get("offload_src"), "device", OFFLOAD_SRC)
        dst = self.memory(kw.get("offload_dst"), "pinned_host", OFFLOAD_DST)
        return PolicySpec(OFFLOAD_NAMES, names=saved, offloaded=offloaded, src=src, dst=dst)

    def src_dst(self, node: ast.Call) -> tuple[str, str]:
        values = list(node.args)
        kw = {k.arg: k.value for k in node.keywords}
        if len(values) > 2 or set(kw) - {"offload_src", "offload_dst"}:
            self.fail(node, f"{OFFLOAD_DOTS} takes (offload_src, offload_dst).")
        src = values[0] if len(values) > 0 else kw.get("offload_src")
        dst = values[1] if len(values) > 1 else kw.get("offload_dst")
        return self.memory(src, "device", OFFLOAD_SRC), self.memory(dst, "pinned_host", OFFLOAD_DST)

    def memory(self, node: ast.AST | None, default: str, allowed: tuple[str, ...]) -> str:
        if node is None:
            return default
        kind = self.string(node)
        if kind not in allowed:
            which = "offload_src" if allowed is OFFLOAD_SRC else "offload_dst"
            self.fail(
                node,
                f"{which} {kind!r}: JAX offloads from 'device' to 'pinned_host' "
                f"memory, so {which} must be {allowed[0]!r}.",
            )
        return kind

    def string(self, node: ast.AST) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        self.fail(node, f"expected a quoted name like 'mlp', got {ast.unparse(node)}.")

    def string_list(self, node: ast.AST | None) -> list[str]:
        if node is None:
            return []
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.string(e) for e in node.elts]
        self.fail(node, f"expected a list of quoted names, got {ast.unparse(node)}.")

    def no_keywords(self, node: ast.Call) -> None:
        if node.keywords:
            self.fail(node.keywords[0].value, f"{_callee(node)} takes positional arguments only.")


def _callee(node: ast.Call) -> str:
    """The name a policy call calls (`_Parser.policy` admits no other call)."""
    assert isinstance(node.func, ast.Name)
    return node.func.id


def from_jax(
    policy: Policy | None, declared: dict[str, Callable] | None = None
) -> PolicySpec | None:
    """The spec of a policy object found in a traced program (a site's policy),
    or None when it is not one remat-tui can name (a user-written callable the
    target did not declare). `None` is JAX's default: nothing_saveable."""
    from remat_tui.core.jaxcompat import policy_objects

    for name, fn in (declared or {}).items():
        if fn is policy and policy is not None:
            return PolicySpec(name, declared=True)
    described = policy_objects.describe(policy)
    if described is None:
        return None
    kind, args = described
    if kind == BOTH:
        parts = tuple(from_jax(p, declared) for p in args["parts"])
        named = tuple(p for p in parts if p is not None)
        return PolicySpec(BOTH, parts=named) if len(named) == len(parts) else None
    return PolicySpec(
        kind,
        names=sorted_unique(list(args.get("names", ()))),
        offloaded=sorted_unique(list(args.get("offloaded", ()))),
        src=args.get("src", "device"),
        dst=args.get("dst", "pinned_host"),
    )


def describe_jax(policy: Policy | None, declared: dict[str, Callable] | None = None) -> str:
    """A policy object's canonical spec, or `custom:<repr>` for one we cannot name."""
    return describe(from_jax(policy, declared), policy)


def describe(spec: PolicySpec | None, policy: Policy | None) -> str:
    """`spec` (from_jax of the policy object `policy`) as a site reports it:
    its canonical spelling, or `custom:<repr>` when it could not be named."""
    return spec.canonical if spec is not None else f"custom:{_short_repr(policy)}"


def _short_repr(policy: object) -> str:
    name = getattr(policy, "__qualname__", None)
    return name if name else repr(policy)
