"""Provides `verdicts`: which parts of a configuration change nothing, and why
(Contract 14's "did it apply"), read off the traced program: a name a policy
lists that no checkpoint_name makes (a typo), a name made only where the
policy does not reach (outside the checkpoint whose policy lists it: in a
scan around it, or in code under no checkpoint), a policy whose rule does
not look at names, a site's policy under an outer policy (JAX judges the
whole body of the outermost checkpoint by its policy, `trace.rules`),
and an offload that moves nothing. `xla.compile.same_program` adds, for a
compiled configuration, whether dropping a name or the outer policy
compiles to the same program.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from remat_tui.core import jaxcompat as jc
from remat_tui.core.model import Source
from remat_tui.core.setup import policies
from remat_tui.core.trace.origins import encloses
from remat_tui.core.trace.sites import FoundSite

if TYPE_CHECKING:
    from remat_tui.core.trace.traced import Trace

# Policies whose rule looks at checkpoint_names.
_LOOKS_AT_NAMES = ("save_only_these_names", "save_any_names_but_these", policies.OFFLOAD_NAMES)


@dataclass(frozen=True)
class Applied:
    """One part of a configuration that changes nothing, and why.

    Attributes:
        what: the part: `"name 'typo' in the outer policy"`, `"site 2's policy"`.
        why: why it changes nothing, in words.
        kind: `"never_made"`, `"not_reached"`, `"no_names"`, `"outer_decides"`,
            `"offloads_nothing"` or `"same_program"`.
    """

    what: str
    why: str
    kind: str

    def to_dict(self) -> dict:
        return {"what": self.what, "why": self.why, "kind": self.kind}


def verdicts(t: Trace, names: set[str], host_bytes: int) -> list[Applied]:
    """What changes nothing in the traced configuration `t` (`trace.traced`
    Trace): `names` are the checkpoint_names its program makes, `host_bytes`
    the residual bytes it offloads."""
    out: list[Applied] = []
    outer = t.config.spec
    if outer.kind != policies.AS_WRITTEN:
        out += _names(outer, "the outer policy", names, region=None, t=t)
        out += _offload(outer, "the outer policy", host_bytes)
    for f in t.sites:
        overridden = f.site.id in t.plan
        spec = t.plan.get(f.site.id) or f.site.spec
        if spec is None or spec.kind == policies.AS_WRITTEN:
            continue  # a policy remat-tui cannot read, or the checkpoint removed
        where = f"site {f.site.id}'s policy ({f.site.function})"
        if outer.kind != policies.AS_WRITTEN:
            if not overridden and not spec.mentioned_names():
                continue  # the code's own policy, naming nothing: nothing to flag

            out.append(Applied(where, f"the outer policy ({outer.canonical}) decides what is "
                               f"saved in its whole body, site {f.site.id}'s included: JAX "
                               "judges a checkpoint's body by the outermost checkpoint's "
                               "policy", "outer_decides"))  # fmt: skip
            continue
        around = _enclosing(t, f)
        if around is not None:
            planned = t.plan.get(around.site.id)
            label = planned.canonical if planned is not None else around.site.policy
            if overridden or spec.mentioned_names():
                out.append(Applied(where, f"site {around.site.id}'s checkpoint "
                                   f"({around.site.function}) is around it, and its policy "
                                   f"({label}) decides what is saved in its "
                                   f"whole body, site {f.site.id}'s included: JAX judges a "
                                   "checkpoint's body by the outermost checkpoint's policy",
                                   "outer_decides"))  # fmt: skip
            continue
        out += _names(spec, where, names, region=f, t=t)
    return out


def _enclosing(t: Trace, inner: FoundSite) -> FoundSite | None:
    """The outermost site around `inner` whose checkpoint is kept, or None."""
    kept = [
        f
        for f in t.sites
        if f is not inner
        and encloses(f, inner)
        and not (f.site.id in t.plan and t.plan[f.site.id].kind == policies.AS_WRITTEN)
    ]
    return min(kept, key=lambda f: len(f.steps)) if kept else None


def _names(
    spec: policies.PolicySpec, where: str, names: set[str], region: FoundSite | None, t: Trace
) -> list[Applied]:
    """The names `spec` lists that change nothing where it applies (`region`:
    a FoundSite, or None for the whole function)."""
    out = []
    listed = sorted(spec.mentioned_names())
    if listed and not _looks_at_names(spec):
        names_said = f"name{'s' if len(listed) > 1 else ''} {', '.join(map(repr, listed))}"
        out.append(Applied(f"the {names_said} in {where}",  # fmt: skip
                           f"{spec.canonical}'s rule does not look at names: "
                           + _ignores(spec), "no_names"))  # fmt: skip
        return out
    made = ", ".join(sorted(names)) or "none"
    for name in listed:
        what = f"name {name!r} in {where}"
        if name not in names:
            out.append(Applied(what, f"no checkpoint_name({name!r}) runs in this function "
                               f"(the names it makes: {made})", "never_made"))  # fmt: skip
        elif region is not None and not _made_in(region.body, name):
            out.append(Applied(what, f"{name!r} is made only outside the checkpoint this "
                               f"policy belongs to {_made_where(t, name)}: a checkpoint's "
                               "policy judges its own body alone", "not_reached"))  # fmt: skip
    return out


def _offload(spec: policies.PolicySpec, where: str, host_bytes: int) -> list[Applied]:
    if (spec.offloaded_names() or spec.uses(policies.OFFLOAD_DOTS)) and not host_bytes:
        return [Applied(f"the offload in {where}", "no residual it would offload is saved: "
                        "nothing moves to host memory", "offloads_nothing")]  # fmt: skip
    return []


def _looks_at_names(spec: policies.PolicySpec) -> bool:
    if spec.kind == policies.BOTH:
        return any(_looks_at_names(p) for p in spec.parts) and not any(
            p.kind == "everything_saveable" for p in spec.parts
        )
    return spec.kind in _LOOKS_AT_NAMES


def _ignores(spec: policies.PolicySpec) -> str:
    if spec.uses("save_anything_except_these_names"):
        return "JAX's save_anything_except_these_names saves every value, whatever its names"
    if spec.kind == policies.BOTH and any(p.kind == "everything_saveable" for p in spec.parts):
        return "its everything_saveable saves every value, named or not"
    return "a name it lists saves nothing more"


def _made_in(body: jc.Jaxpr | None, name: str) -> bool:
    return body is not None and any(
        jc.checkpoint_name(eqn) == name for eqn, _ in jc.nested_eqns(body)
    )


def _made_where(t: Trace, name: str) -> str:
    """`(it is made at model.py:12, inside the scan at model.py:30)`, from the
    primal program."""
    if t.primal is None:
        return ""
    found = _find(jc.open_jaxpr(t.primal.closed), name, ())
    if found is None:
        return ""
    eqn, around = found
    at = jc.user_source(eqn.source_info)
    words = f"(it is made at {_where(at)}" if at else "(it is made"
    for outer in around[-1:]:
        src = jc.user_source(outer.source_info)
        words += f", inside the {jc.primitive_name(outer)} at {_where(src)}" if src else ""
    return words + ")"


def _find(
    jaxpr: jc.Jaxpr, name: str, around: tuple
) -> tuple[jc.JaxprEqn, tuple[jc.JaxprEqn, ...]] | None:
    for eqn in jaxpr.eqns:
        if jc.checkpoint_name(eqn) == name:
            return eqn, around
        for body in jc.bodies(eqn):
            hit = _find(body.jaxpr, name, (*around, eqn))
            if hit is not None:
                return hit
    return None


def _where(source: Source | None) -> str:
    return f"{os.path.basename(source.file)}:{source.line}" if source else "?"
