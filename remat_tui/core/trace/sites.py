"""Provides checkpoint sites (Contract 5): every `jax.checkpoint` application
in a target's primal program, and the program rewritten with some sites'
policies changed or their checkpoints removed.

Sites are read off the primal jaxpr (`make_jaxpr` of the target), where each
application is one `remat` equation, inside scan, jit, cond and vmap bodies
included. Overrides rewrite that jaxpr; the analysis then differentiates its
evaluation, which binds the same primitives with the same source information
as the user's own code edited by hand. (Changing the policy at the moment
`jax.checkpoint` binds would not do: JAX caches the traces of jitted and
checkpointed functions, so a cached body would keep the old policy.)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from remat_tui.core import jaxcompat as jc
from remat_tui.core.model import Site, Source, Wrapper
from remat_tui.core.setup import policies
from remat_tui.core.trace import wrappers, written_checkpoints
from remat_tui.errors import RematError

# (equation index, the body's slot in that equation's params: jaxcompat.Body.slot)
Step = tuple[int, tuple]
INLINE = object()  # the override that removes a checkpoint


@dataclass(frozen=True)
class Splice:
    """A rewrite action that replaces an equation by a jaxpr computing the
    same outputs from the same inputs: `make(eqn)` returns it (open, no
    constants of its own; `trace.rebuilt_scans` rebuilds a scan so)."""

    make: Callable


@dataclass
class FoundSite:
    """A site plus where its equation is, for rewriting and for origins."""

    site: Site
    steps: tuple[Step, ...]  # from the top jaxpr down to the jaxpr holding the equation
    index: int  # the remat equation's index in that jaxpr
    lines: frozenset[tuple[str, int]] = field(default_factory=frozenset)  # its body's lines
    body: jc.Jaxpr | None = None  # the remat equation's body jaxpr
    policy: jc.Policy | None = None  # the policy the code binds there
    _frames: dict | None = field(default=None, repr=False)

    def frames(self) -> dict:
        """jaxcompat.frames_key -> the body's equations with those frames:
        how `trace.origins` tells what JAX copied out of this body.
        Read once per primal program, on first need."""
        if self.body is None:
            return {}  # no body, no equations (holds() asks the same)
        if self._frames is None:
            table: dict = {}
            for eqn, _ in jc.nested_eqns(self.body):
                table.setdefault(jc.frames_key(eqn.source_info), []).append(eqn)
            self._frames = table
        return self._frames

    def holds(self, key: Hashable) -> bool:
        """Whether the body has an equation with the frames `key`."""
        return self.body is not None and key in self.frames()

    def output_types(self, key: Hashable) -> set[tuple[str, ...]]:
        """The output types of the body's equations with the frames `key`
        (asked only where frames alone do not tell sites apart)."""
        return {tuple(jc.short(v.aval) for v in e.outvars) for e in self.frames().get(key, ())}


def find_sites(
    jaxpr: jc.Jaxpr, declared: dict | None, prefer_dir: str | None, target_file: str | None = None
) -> list[FoundSite]:
    """Every remat equation in `jaxpr`, in program order (outer before inner).
    A checkpoint no frame of the user's applies (`f3 = jax.checkpoint(f)` at
    module level) is placed at the target file's only jax.checkpoint of
    its function (`trace.written_checkpoints`)."""
    found: list[FoundSite] = []

    def walk(
        j: jc.Jaxpr, steps: tuple[Step, ...], trip: int | None, outer_source: Source | None
    ) -> None:
        for i, eqn in enumerate(j.eqns):
            held = jc.bodies(eqn)
            if not held:
                continue  # no checkpoint, no body: its line is not needed (reading it is slow)
            # Inside a scan body the traceback stops at the body: a library's
            # scan (nnx.scan, nn.scan) leaves only its own frames there, and the
            # user's line is the one that called the enclosing scan.
            own = jc.own_source(eqn.source_info, prefer_dir, fallback=False) or outer_source
            if jc.is_remat(eqn):
                policy = jc.remat_policy(eqn)
                spec = policies.from_jax(policy, declared)
                function = jc.remat_function(eqn)
                called_at = own or jc.user_source(eqn.source_info)
                source, wrapper = _wrapper_call(eqn, called_at, function) or (called_at, None)
                if source is None:
                    source = written_checkpoints.module_checkpoint(target_file, _last(function))
                site = Site(
                    id=len(found) + 1,
                    function=function,
                    source=source,
                    policy=policies.describe(spec, policy),
                    trip_count=trip,
                    spec=spec,
                    effective_spec=spec,
                    called_at=called_at,
                    wrapper=wrapper,
                    prevent_cse=jc.remat_prevent_cse(eqn),
                )
                checkpointed = jc.remat_body(eqn)
                lines = _body_lines(checkpointed, prefer_dir)
                found.append(FoundSite(site, steps, i, lines, checkpointed, policy))
            if not jc.differentiates_bodies(eqn):
                continue
            for body in held:
                inner = (trip or 1) * body.iterations if body.iterations else trip
                walk(body.jaxpr, (*steps, (i, body.slot)), inner, own)

    walk(jaxpr, (), None, None)
    return found


def _wrapper_call(
    eqn: jc.JaxprEqn, called_at: Source | None, function: str
) -> tuple[Source, Wrapper] | None:
    """(the line of the library call that applies this checkpoint, the
    Wrapper), when a library's wrapper binds it (nn.remat, nnx.remat,
    eqx.filter_checkpoint: the innermost frame outside JAX is the library's)
    and the source of the code that runs it says which call that is."""
    names = wrappers.wrapper_names(jc.calling_file(eqn.source_info))
    if not names or called_at is None:
        return None
    return wrappers.find_wrapper(names, called_at, function)


def _body_lines(jaxpr: jc.Jaxpr, prefer_dir: str | None) -> frozenset[tuple[str, int]]:
    lines = set()
    for eqn, _ in jc.nested_eqns(jaxpr):
        src = jc.own_source(eqn.source_info, prefer_dir)
        if src is not None:
            lines.add((src.file, src.line))
    return frozenset(lines)


def resolve_overrides(
    found: list[FoundSite],
    overrides: dict[int | str, policies.PolicySpec],
    jaxpr: jc.Jaxpr | None = None,
) -> dict[int, policies.PolicySpec]:
    """Site id -> the spec to apply there. Keys are ids or function names (every
    site of that function); an id wins over a name for its own site."""
    by_id = {f.site.id: f for f in found}
    by_name: dict[str, list[int]] = {}
    for f in found:
        by_name.setdefault(f.site.function, []).append(f.site.id)
    plan: dict[int, policies.PolicySpec] = {}
    named = [(k, v) for k, v in overrides.items() if isinstance(k, str)]
    numbered = [(k, v) for k, v in overrides.items() if not isinstance(k, str)]
    in_order: list[tuple[int | str, policies.PolicySpec]] = [*named, *numbered]
    for key, spec in in_order:
        ids: list[int] = by_name.get(key, []) if isinstance(key, str) else [key]
        if not ids or any(i not in by_id for i in ids):
            if isinstance(key, str) and jaxpr is not None and _runs_function(jaxpr, key):
                raise RematError(
                    f"{key!r} runs in this function but no jax.checkpoint wraps it, so "
                    f"it has no policy to set. Wrap it with jax.checkpoint in your code, "
                    f"or use --policy for an outer checkpoint. {_site_list(found)}"
                )
            raise RematError(f"no checkpoint site {key!r}. {_site_list(found)}")
        for i in ids:
            plan[i] = spec
    return plan


def _runs_function(jaxpr: jc.Jaxpr, name: str) -> bool:
    """Whether a function of that name (or a method ending in it) appears in the
    user's frames behind any equation: on the error path only."""

    return any(
        fn == name or fn.endswith("." + name)
        for eqn, _ in jc.nested_eqns(jaxpr)
        for fn in jc.own_function_names(eqn.source_info)
    )


def _site_list(found: list[FoundSite]) -> str:
    if not found:
        return (
            "This function applies no jax.checkpoint, so it has no sites; "
            "use --policy for an outer checkpoint instead."
        )
    listed = ", ".join(
        f"{f.site.id} ({f.site.function}"
        + (f" at {f.site.source.where()}" if f.site.source else "")
        + ")"
        for f in found
    )
    return f"Sites: {listed}. Give a site id or a function name."


def rewrite(jaxpr: jc.Jaxpr, found: list[FoundSite], plan: dict, declared: dict | None,
            splices: dict | None = None) -> jc.Jaxpr:  # fmt: skip
    """`jaxpr` with each planned site's policy replaced, or its checkpoint
    removed (as_written: the body runs inline, as if `jax.checkpoint` were
    deleted from the source); and `splices` ({(steps, index): Splice}) made,
    each after the overrides inside the equation it replaces."""
    actions: dict[tuple, object] = dict(splices or {})
    for f in found:
        spec = plan.get(f.site.id)
        if spec is None:
            continue
        action = (
            INLINE
            if spec.kind == policies.AS_WRITTEN
            else policies.checkpoint_policy(spec, declared)
        )
        actions[(f.steps, f.index)] = action
    return _rewrite(jaxpr, (), actions)


def _rewrite(jaxpr: jc.Jaxpr, steps: tuple[Step, ...], actions: dict) -> jc.Jaxpr:
    depth = len(steps)
    below = {
        addr[0][depth] for addr in actions if len(addr[0]) > depth and addr[0][:depth] == steps
    }
    subst: dict = {}
    eqns = []
    for i, eqn in enumerate(jaxpr.eqns):
        if subst:
            eqn = eqn.replace(invars=[_sub(v, subst) for v in eqn.invars])
        for body in jc.bodies(eqn):
            step = (i, body.slot)
            if step in below:
                new = _rewrite(body.jaxpr, (*steps, step), actions)
                eqn = jc.replace_body(eqn, body.slot, new)
        action = actions.get((steps, i))
        if action is None:
            eqns.append(eqn)
        elif action is INLINE:
            eqns.extend(_inline(eqn, jc.remat_body(eqn), subst))
        elif isinstance(action, Splice):
            eqns.extend(_inline(eqn, action.make(eqn), subst))
        else:
            eqns.append(jc.with_policy(eqn, action))
    if not subst:
        return jaxpr.replace(eqns=eqns)
    return jaxpr.replace(eqns=eqns, outvars=[_sub(v, subst) for v in jaxpr.outvars])


def _inline(eqn: jc.JaxprEqn, body: jc.Jaxpr, subst: dict) -> list:
    """`body` (a remat equation's, or a Splice's jaxpr) in place of `eqn`,
    with fresh variables, wired to its inputs; its outputs are recorded in
    `subst` for the equations that follow."""
    env = dict(zip(body.invars, eqn.invars, strict=True))
    out = []
    for inner in body.eqns:
        outvars = [jc.fresh_var(v) for v in inner.outvars]
        env.update(zip(inner.outvars, outvars, strict=True))
        out.append(inner.replace(invars=[_sub(v, env) for v in inner.invars], outvars=outvars))
    for outer_var, body_var in zip(eqn.outvars, body.outvars, strict=True):
        if not isinstance(outer_var, jc.DropVar):
            subst[outer_var] = _sub(body_var, env)
    return out


def _sub(v: jc.Atom, env: dict) -> jc.Atom:
    return env.get(v, v) if isinstance(v, jc.Var) else v


def _last(function: str) -> str:
    """The name a checkpoint's first argument has for `function`: `step` of
    `f.<locals>.step`."""
    return function.rsplit(".", 1)[-1]
