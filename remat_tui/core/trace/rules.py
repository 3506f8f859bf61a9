"""Provides the rule that saved each residual (Contract 14): the decision of
the policy in effect at the equation that made it, asked of that policy as
JAX asks it (jaxcompat.decisions), and put in words.

Which policy is in effect where, as JAX's partial evaluation applies them: an
outer policy (`--policy`) wraps the whole function in one checkpoint, and
JAX judges every equation of a checkpoint's body, the bodies of checkpoints
nested in it included, by the outermost checkpoint's policy (its rule for a
nested checkpoint partially evaluates the body with the caller's policy).
So the outer policy decides everywhere when one is set; else the outermost
checkpoint site around the equation (a site's override, or the policy its
code binds); else none, and autodiff saves whatever the backward pass reads.

The equation asked about is the one making the saved value, followed into
the bodies of calls and through the copies JAX inserts: a checkpoint_name's
own equation for a named value (names policies look at that equation), the
dot itself for a dot's output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from remat_tui.core import jaxcompat as jc
from remat_tui.core.jaxcompat.decisions import OFFLOAD, RECOMPUTE, SAVE, Decision, decide, is_conv
from remat_tui.core.setup import policies
from remat_tui.core.stories import (
    ARGUMENT,
    CONSTANT,
    NO_CHECKPOINT,
    POLICY,
    REGION_OUTPUT,
    UNEXPLAINED,
    Rule,
)
from remat_tui.core.trace.origins import Origins, encloses
from remat_tui.core.trace.residuals import FoundResidual

if TYPE_CHECKING:
    from remat_tui.core.trace.traced import Trace

NOT_UNDER_ANY = "under no checkpoint: autodiff saves every value the backward pass reads"


@dataclass(frozen=True)
class InEffect:
    """A policy in effect over a region: its spec (None for one remat-tui
    cannot name), its label, the JAX callable, and its site (None: outer)."""

    spec: policies.PolicySpec | None
    label: str
    policy: jc.Policy
    site: int | None
    function: str | None = None

    def where(self) -> str:
        if self.site is None:
            return "the outer policy"
        return f"site {self.site}'s policy ({self.function})"


class Governors:
    """The policy in effect at each place of one traced configuration."""

    def __init__(self, t: Trace) -> None:
        declared = t.target.policies
        spec = t.config.spec
        self.outer = None
        if spec.kind != policies.AS_WRITTEN:
            self.outer = InEffect(
                spec, spec.canonical, policies.checkpoint_policy(spec, declared), None
            )
        self.by_site: dict[int, InEffect] = {}
        self.found = []
        for f in t.sites:
            planned = t.plan.get(f.site.id)
            if planned is not None and planned.kind == policies.AS_WRITTEN:
                continue  # its checkpoint removed: the body runs inline
            if planned is not None:
                own = InEffect(
                    planned,
                    planned.canonical,
                    policies.checkpoint_policy(planned, declared),
                    f.site.id,
                    f.site.function,
                )
            else:
                policy = f.policy if f.policy is not None else jax_default()
                own = InEffect(f.site.spec, f.site.policy, policy, f.site.id, f.site.function)
            self.by_site[f.site.id] = own
            self.found.append(f)

    def at(self, site: int | None) -> InEffect | None:
        """The policy that decides for a value computed in site `site`'s body
        (None: outside every site)."""
        if self.outer is not None:
            return self.outer
        inner = next((f for f in self.found if f.site.id == site), None)
        if inner is None:
            return None
        around = [f for f in self.found if f is inner or encloses(f, inner)]
        return self.by_site[min(around, key=lambda f: len(f.steps)).site.id]


def jax_default() -> Callable:
    """What a checkpoint without a policy applies: nothing_saveable."""
    return policies.checkpoint_policy(policies.PolicySpec("nothing_saveable"))


def rule_of(fr: FoundResidual, origins: Origins, forward: jc.Jaxpr, governors: Governors) -> Rule:
    """The rule that saved the residual `fr` (a FoundResidual) of the forward
    jaxpr `forward`."""
    r = fr.residual
    if r.kind == "argument":
        return Rule(
            ARGUMENT,
            "an argument of the function: in memory for the whole step, "
            "so autodiff saves it whatever the policy",
        )
    if r.kind in ("literal", "constant"):
        return Rule(CONSTANT, f"a {r.kind} the backward pass reads: part of the program")
    eqn = origins.judged(forward, fr.var)
    site = None
    if eqn is not None and governors.outer is None:
        # The site by the equation's own frames, and its place among alike
        # equations where sites share a body, tells apart sites that run one
        # function (three jax.checkpoint(g) calls); the origin's, by its line,
        # where neither says.
        site = origins.site_by_frames(eqn, forward)
        if site is False:
            site = r.origin.site if r.origin else None
    governing = governors.at(site)
    if eqn is None or governing is None:
        return Rule(NO_CHECKPOINT, NOT_UNDER_ANY)
    decision = decide(governing.policy, eqn)
    what = equation_words(eqn)
    if decision.what in (SAVE, OFFLOAD):
        matched, because = _because(governing.spec, governing.label, eqn, decision)
        return Rule(
            POLICY,
            f"{what}: {because} ({governing.where()})",
            governing.label,
            governing.site,
            decision.what,
            matched,
            what,
        )
    if governing.site is not None:
        words = (
            f"an output of checkpoint site {governing.site} ({governing.function}) that code "
            f"under no checkpoint reads, and there autodiff saves what the backward pass "
            f"reads (inside the site, {governing.label} recomputes {what})"
        )
        return Rule(REGION_OUTPUT, words, governing.label, governing.site, RECOMPUTE, None, what)
    words = (
        f"{governing.label} answers recompute for {what}, yet JAX saved it ({governing.where()})"
    )
    return Rule(UNEXPLAINED, words, governing.label, None, RECOMPUTE, None, what)


def equation_words(eqn: jc.JaxprEqn) -> str:
    """`checkpoint_name 'h'`, `dot_general with no batch dimensions`, `tanh`."""
    name = jc.checkpoint_name(eqn)
    if name is not None:
        return f"checkpoint_name {name!r}"
    batch = jc.primitives.dot_batch_dims(eqn)
    if batch is not None:
        return "dot_general " + (
            "with batch dimensions" if any(batch) else "with no batch dimensions"
        )
    return jc.primitive_name(eqn)


def _because(
    spec: policies.PolicySpec | None, label: str, eqn: jc.JaxprEqn, decision: Decision
) -> tuple[str, str]:
    """(which rule of the policy matched, it in words) for a policy that
    saves or offloads at `eqn`."""
    kind = spec.kind if spec is not None and not spec.declared else None
    name = jc.checkpoint_name(eqn)
    moved = f"moves it to {decision.dst or 'host memory'}"
    if kind == policies.BOTH and spec is not None:
        for which, part in zip(("first", "second"), spec.parts, strict=False):
            part_decision = decide(policies.checkpoint_policy(part), eqn)
            if part_decision.what != RECOMPUTE:
                matched, words = _because(part, part.canonical, eqn, part_decision)
                return matched, f"{words}, the {which} of the two policies {policies.BOTH} joins"
    if kind == "everything_saveable":
        return "everything", "everything_saveable saves every value"
    if kind == "save_anything_except_these_names":
        return "everything", f"{label} saves every value (JAX's version ignores its names)"
    if kind == "dots_saveable":
        return ("conv" if is_conv(eqn) else "dot"), (
            "dots_saveable saves every dot_general and convolution"
        )
    if kind == "dots_with_no_batch_dims_saveable":
        return "dot_no_batch_dims", f"{kind} saves those"
    if kind == policies.OFFLOAD_DOTS:
        return "dot_no_batch_dims_offloaded", f"{policies.OFFLOAD_DOTS} {moved}"
    if kind == "save_only_these_names" and name is not None:
        return "name_saved", f"{name!r} is among the names {label} saves"
    if kind == "save_any_names_but_these" and name is not None:
        return "name_not_excluded", f"{label} saves every name but those it lists"
    if kind == policies.OFFLOAD_NAMES and name is not None:
        if decision.what == OFFLOAD:
            return "name_offloaded", f"{name!r} is in names_which_can_be_offloaded: it {moved}"
        return "name_saved", f"{name!r} is in names_which_can_be_saved"
    verb = "offloads" if decision.what == OFFLOAD else "saves"
    return "custom", f"the policy {label} {verb} it"
