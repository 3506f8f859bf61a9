"""Provides policy specs (Contract 2): parse, canonical spelling, JAX policy.

A spec is the expression a user would write after `jax.checkpoint_policies.`.
It is parsed with `ast` (never `eval`) into a `PolicySpec`, whose `canonical`
spelling is the cache key and what reports print.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from remat_tui.errors import RematError

AS_WRITTEN = "as_written"

# Every attribute of jax.checkpoint_policies that is a policy by itself,
# with JAX's aliases mapped to the name we print.
SIMPLE = {
    "everything_saveable": "everything_saveable",
    "nothing_saveable": "nothing_saveable",
    "dots_saveable": "dots_saveable",
    "checkpoint_dots": "dots_saveable",
    "dots_with_no_batch_dims_saveable": "dots_with_no_batch_dims_saveable",
    "checkpoint_dots_with_no_batch_dims": "dots_with_no_batch_dims_saveable",
}
NAME_LISTS = (
    "save_only_these_names",
    "save_any_names_but_these",
    "save_anything_except_these_names",
)
OFFLOAD_NAMES = "save_and_offload_only_these_names"
OFFLOAD_DOTS = "offload_dot_with_no_batch_dims"
BOTH = "save_from_both_policies"
CALLABLE_FACTORIES = (*NAME_LISTS, OFFLOAD_NAMES, OFFLOAD_DOTS, BOTH)
# JAX offloads a value from where it lives (device memory) to pinned host
# memory, and treats any other destination kind as device memory.
OFFLOAD_SRC, OFFLOAD_DST = ("device",), ("pinned_host",)
OFFLOAD_KEYWORDS = (
    "names_which_can_be_saved",
    "names_which_can_be_offloaded",
    "offload_src",
    "offload_dst",
)

EXAMPLES = "e.g. dots_saveable, save_only_these_names('a', 'b') or as_written"


@dataclass(frozen=True)
class PolicySpec:
    """A parsed policy. `kind` is the policy's function or attribute name."""

    kind: str
    names: tuple[str, ...] = ()  # name-list policies
    offloaded: tuple[str, ...] = ()  # save_and_offload_only_these_names
    src: str = "device"
    dst: str = "pinned_host"
    parts: tuple[PolicySpec, ...] = ()  # save_from_both_policies
    declared: bool = False  # a policy the target declared

    @cached_property
    def canonical(self) -> str:
        """The one spelling: the cache key's part and what reports print."""
        if self.kind in NAME_LISTS:
            return f"{self.kind}({', '.join(map(repr, self.names))})"
        if self.kind == OFFLOAD_NAMES:
            return (
                f"{OFFLOAD_NAMES}(names_which_can_be_saved={list(self.names)!r}, "
                f"names_which_can_be_offloaded={list(self.offloaded)!r}, "
                f"offload_src={self.src!r}, offload_dst={self.dst!r})"
            )
        if self.kind == OFFLOAD_DOTS:
            return f"{OFFLOAD_DOTS}({self.src!r}, {self.dst!r})"
        if self.kind == BOTH:
            return f"{BOTH}({', '.join(p.canonical for p in self.parts)})"
        return self.kind

    def python(self, fn_name: str = "f") -> str:
        """The line a user pastes to get this policy in their own code."""
        if self.kind == AS_WRITTEN:
            return f"{fn_name}  # as written: no outer jax.checkpoint"
        if self.declared:
            return f"jax.checkpoint({fn_name}, policy={self.kind})"
        return f"jax.checkpoint({fn_name}, policy={self.expression()})"

    def expression(self) -> str:
        if self.declared:  # the target's own policy: a name in the user's module
            return self.kind
        if self.kind == BOTH:
            inner = ", ".join(p.expression() for p in self.parts)
            return f"jax.checkpoint_policies.{BOTH}({inner})"
        return f"jax.checkpoint_policies.{self.canonical}"

    def mentioned_names(self) -> set[str]:
        """Every checkpoint_name the spec refers to."""
        out = set(self.names) | set(self.offloaded)
        for p in self.parts:
            out |= p.mentioned_names()
        return out

    def warnings(self, defined_names: set[str] | None = None) -> list[str]:
        """What the user should know before trusting this policy."""
        notes = []
        if self.uses("save_anything_except_these_names"):
            notes.append(
                "save_anything_except_these_names ignores its names in JAX: it "
                "saves everything (like everything_saveable). Use "
                "save_any_names_but_these to save named values except some."
            )
        if defined_names is not None:
            unknown = sorted(self.mentioned_names() - defined_names)
            if unknown:
                known = ", ".join(sorted(defined_names)) or "none"
                missing = ", ".join(map(repr, unknown))
                notes.append(
                    f"the function defines no checkpoint_name {missing}"
                    f" (names it defines: {known})."
                )
        return notes

    def uses(self, kind: str) -> bool:
        """Whether this policy is, or combines, the policy `kind`."""
        return self.kind == kind or any(p.uses(kind) for p in self.parts)

    def offloaded_names(self) -> set[str]:
        """The checkpoint_names this policy moves to host memory."""
        out = set(self.offloaded)
        for p in self.parts:
            out |= p.offloaded_names()
        return out

    def recomputing_offloads(self) -> PolicySpec:
        """This policy with what it offloads recomputed instead (everything it
        saves on device stays saved): what an offload is weighed against."""
        if self.kind == OFFLOAD_NAMES:
            return PolicySpec("save_only_these_names", names=self.names)
        if self.kind == OFFLOAD_DOTS:
            return PolicySpec("nothing_saveable")
        if self.kind == BOTH:
            return PolicySpec(BOTH, parts=tuple(p.recomputing_offloads() for p in self.parts))
        return self


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

    def __contains__(self, name) -> bool:
        return True


def check_syntax(text: str) -> None:
    """Raise RematError if `text` cannot be a spec for any target (a bare name
    might be one the target declares, so those pass)."""
    parse(text, AnyName())


def build(spec: PolicySpec, declared: dict[str, Callable] | None = None):
    """The JAX policy callable for `spec` (None for as_written)."""
    import jax

    cp = jax.checkpoint_policies
    if spec.kind == AS_WRITTEN:
        return None
    if spec.declared:
        return (declared or {})[spec.kind]
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
        return cp.save_from_both_policies(*(build(p, declared) for p in spec.parts))
    return getattr(cp, spec.kind)


def builtin_specs() -> list[str]:
    """The built-in policies that need no arguments, in the order the app lists them."""
    return [
        AS_WRITTEN,
        "everything_saveable",
        "nothing_saveable",
        "dots_saveable",
        "dots_with_no_batch_dims_saveable",
        f"{OFFLOAD_DOTS}('device', 'pinned_host')",
    ]


EVERYTHING, NOTHING = PolicySpec("everything_saveable"), PolicySpec("nothing_saveable")
NAMES_ONLY = "save_only_these_names"


def same_decisions(spec: PolicySpec) -> PolicySpec:
    """One spec for every spelling of the same decisions: two specs with equal
    forms save, recompute and offload the same values, by JAX's definitions
    of its policies (checked against print_saved_residuals in
    tests/test_compile_counts.py):

    - `save_only_these_names()` saves nothing: nothing_saveable;
    - `save_anything_except_these_names(...)` saves everything in JAX
      (`lambda *_, **__: True`): everything_saveable;
    - `save_and_offload_only_these_names` offloading nothing is
      `save_only_these_names` of what it saves;
    - `save_from_both_policies` is the OR of two boolean policies:
      everything_saveable absorbs, nothing_saveable is neutral, name lists
      join, dots_saveable covers dots_with_no_batch_dims_saveable, and the
      order does not matter.

    Not merged: `save_any_names_but_these()` saves every named value, which
    only the target's names can turn into another spelling; a policy the
    target declared is its own."""
    if spec.declared:
        return spec
    if spec.kind == NAMES_ONLY and not spec.names:
        return NOTHING
    if spec.kind == "save_anything_except_these_names":
        return EVERYTHING
    if spec.kind == OFFLOAD_NAMES and not spec.offloaded:
        return same_decisions(PolicySpec(NAMES_ONLY, names=spec.names))
    if spec.kind != BOTH:
        return spec
    a, b = (same_decisions(p) for p in spec.parts)
    if a.offloaded_names() or b.offloaded_names() or OFFLOAD_DOTS in (a.kind, b.kind):
        return PolicySpec(BOTH, parts=(a, b))  # JAX refuses offloads here: its error stands
    for one, other in ((a, b), (b, a)):
        if one == EVERYTHING:
            return EVERYTHING
        if one == NOTHING:
            return other
    if a.kind == b.kind == NAMES_ONLY:
        return PolicySpec(NAMES_ONLY, names=_sorted_unique([*a.names, *b.names]))
    if {a.kind, b.kind} == {"dots_saveable", "dots_with_no_batch_dims_saveable"}:
        return PolicySpec("dots_saveable")
    if a == b:
        return a
    return PolicySpec(BOTH, parts=tuple(sorted((a, b), key=lambda p: p.canonical)))


def names_policy(saved: list[str], offloaded: list[str]) -> PolicySpec:
    """The policy that saves `saved`, offloads `offloaded` and recomputes the rest."""
    if offloaded:
        return PolicySpec(
            OFFLOAD_NAMES, names=tuple(sorted(saved)), offloaded=tuple(sorted(offloaded))
        )
    return PolicySpec("save_only_these_names", names=tuple(sorted(saved)))


class _Parser:
    def __init__(self, source: str, declared: dict[str, Callable]):
        self.source = source
        self.declared = declared

    def fail(self, node: ast.AST, what: str):
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
        name = node.func.id
        if name in NAME_LISTS:
            self.no_keywords(node)
            return PolicySpec(name, names=_sorted_unique([self.string(a) for a in node.args]))
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
        saved = _sorted_unique(self.string_list(kw.get("names_which_can_be_saved")))
        offloaded = _sorted_unique(self.string_list(kw.get("names_which_can_be_offloaded")))
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

    def no_keywords(self, node: ast.Call):
        if node.keywords:
            self.fail(node.keywords[0].value, f"{node.func.id} takes positional arguments only.")


def _sorted_unique(names: list[str]) -> tuple[str, ...]:
    """Name lists are sets to JAX; sorted, they have one spelling."""
    return tuple(sorted(set(names)))


def from_jax(policy, declared: dict[str, Callable] | None = None) -> PolicySpec | None:
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
        return None if None in parts else PolicySpec(BOTH, parts=parts)
    return PolicySpec(
        kind,
        names=_sorted_unique(list(args.get("names", ()))),
        offloaded=_sorted_unique(list(args.get("offloaded", ()))),
        src=args.get("src", "device"),
        dst=args.get("dst", "pinned_host"),
    )


def describe_jax(policy, declared: dict[str, Callable] | None = None) -> str:
    """A policy object's canonical spec, or `custom:<repr>` for one we cannot name."""
    return describe(from_jax(policy, declared), policy)


def describe(spec: PolicySpec | None, policy) -> str:
    """`spec` (from_jax of the policy object `policy`) as a site reports it:
    its canonical spelling, or `custom:<repr>` when it could not be named."""
    return spec.canonical if spec is not None else f"custom:{_short_repr(policy)}"


def _short_repr(policy) -> str:
    name = getattr(policy, "__qualname__", None)
    return name if name else repr(policy)
