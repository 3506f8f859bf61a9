"""Provides the policy spec as a value (Contract 2): `PolicySpec`, its one
canonical spelling and the Python to paste, what it names and offloads,
and which spellings make the same decisions (`same_decisions`). Reading
specs from text and from JAX's policy objects, and building JAX's, is
`setup.policies`'s job (which re-exports everything here).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

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

    def short(self) -> str:
        """A names policy as the names it saves and offloads (`save qkv ·
        offload h`); any other as its canonical spelling. For tables: reports
        and JSON keep the canonical spelling."""
        if self.declared or self.kind not in (NAMES_ONLY, OFFLOAD_NAMES):
            return self.canonical
        parts = []
        if self.names:
            parts.append("save " + ", ".join(self.names))
        if self.offloaded:
            parts.append("offload " + ", ".join(self.offloaded))
        return " · ".join(parts) or "save no names"

    def python(self, fn_name: str = "f", keywords: str = "") -> str:
        """The line a user pastes to get this policy in their own code
        (`keywords`: the checkpoint's others, `, prevent_cse=False`)."""
        if self.kind == AS_WRITTEN:
            return f"{fn_name}  # as written: no outer jax.checkpoint"
        if self.declared:
            return f"jax.checkpoint({fn_name}, policy={self.kind}{keywords})"
        return f"jax.checkpoint({fn_name}, policy={self.expression()}{keywords})"

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

    def declared_policies(self) -> set[str]:
        """The target's own policies this spec refers to (by name)."""
        out = {self.kind} if self.declared else set()
        for p in self.parts:
            out |= p.declared_policies()
        return out

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


NAMES_ONLY = "save_only_these_names"
EVERYTHING, NOTHING = PolicySpec("everything_saveable"), PolicySpec("nothing_saveable")
# The built-in policies that need no arguments, in the order the app lists them.
BUILTINS = (
    PolicySpec(AS_WRITTEN),
    EVERYTHING,
    NOTHING,
    PolicySpec("dots_saveable"),
    PolicySpec("dots_with_no_batch_dims_saveable"),
    PolicySpec(OFFLOAD_DOTS, src="device", dst="pinned_host"),
)


def builtin_specs() -> list[str]:
    """The built-in policies' spellings, as the app and the notebook list them."""
    return [spec.canonical for spec in BUILTINS]


def declared_specs(declared: dict) -> list[PolicySpec]:
    """The policies a target declares (its module's own policy functions)."""
    return [PolicySpec(name, declared=True) for name in declared]


def candidate_specs(declared: dict) -> list[PolicySpec]:
    """Every whole policy a search weighs at one place: the built-ins, then
    the target's own."""
    return [*BUILTINS, *declared_specs(declared)]


def same_decisions(spec: PolicySpec) -> PolicySpec:
    """One spec for every spelling of the same decisions: two specs with equal
    forms save, recompute and offload the same values, by JAX's definitions
    of its policies (checked against print_saved_residuals in
    tests/unit/test_compile_counts.py):

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
        return PolicySpec(NAMES_ONLY, names=sorted_unique([*a.names, *b.names]))
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


def names_part(spec: PolicySpec) -> PolicySpec | None:
    """What `spec` decides by checkpoint_name, as one names policy: `spec`
    itself when it is one (save_only_these_names, or
    save_and_offload_only_these_names), the names half of a
    save_from_both_policies (both halves' names joined, where both are names
    policies); None where nothing is decided by name (a policy the target
    declared is its own)."""
    if spec.declared:
        return None
    if spec.kind in (NAMES_ONLY, OFFLOAD_NAMES):
        return spec
    if spec.kind != BOTH:
        return None
    found = [n for n in map(names_part, spec.parts) if n is not None]
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    saved = [name for n in found for name in n.names]
    offloaded = [name for n in found for name in n.offloaded]
    return names_policy(list(sorted_unique(saved)), list(sorted_unique(offloaded)))


def with_names(spec: PolicySpec | None, names: PolicySpec) -> PolicySpec:
    """`spec` with what it decides by name replaced by the names policy
    `names`, the rest kept: save_from_both_policies(dots_saveable,
    save_only_these_names('a')) with save_only_these_names('a', 'b') is
    save_from_both_policies(dots_saveable, save_only_these_names('a', 'b')).
    `names` alone where `spec` decides nothing by name (or is None: a policy
    not read), or where both halves of a save_from_both_policies do."""
    if spec is None or spec.kind != BOTH or names_part(spec) is None:
        return names
    named = [names_part(p) is not None for p in spec.parts]
    if all(named):
        return names
    return PolicySpec(
        BOTH,
        parts=tuple(
            with_names(p, names) if by_name else p
            for p, by_name in zip(spec.parts, named, strict=True)
        ),
    )


def sorted_unique(names: list[str]) -> tuple[str, ...]:
    """Name lists are sets to JAX; sorted, they have one spelling."""
    return tuple(sorted(set(names)))
