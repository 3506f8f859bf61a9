"""Provides `check`: a guard for upgrades and refactors (Contract 14). One
configuration is analysed and compiled now, and compared with a baseline
saved before (`baseline`: the JSON report `remat-tui check --write` saves):
the residuals, by where they come from and their names, the compiled peak
and the step-time estimate. It is changed when residuals appear or disappear
or the peak moves by more than the tolerance; the estimate is compared and
said, not judged (it is a model, and moves with the chip table).

A residual is known by what a refactor keeps and an upgrade may change: its
kind, its checkpoint_name or argument path, the primitive that computed it,
its function and file, its aval and trip count. Not by its line: moving code
about is not a change; adding a saved value is. Each one said is said at its
own line, though: among residuals alike but for the line, those at the same
line are matched first, and a change names the ones left over.

Where the policies differ (the outer one, or one written or set at a
checkpoint site), the check names that first: it is why residuals appeared.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import jax

from remat_tui.core.model import Analysis
from remat_tui.core.setup.arguments import flatten_arguments
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import device_set, resolve_device
from remat_tui.core.setup.loading import resolve_arguments
from remat_tui.core.setup.meshes import Axes, mesh_of, mesh_words
from remat_tui.core.xla.compile.same_program import program_key
from remat_tui.core.xla.compiled_analysis import analyze_compiled
from remat_tui.errors import RematError
from remat_tui.registry import Target

BASELINE_KEY = "check"  # the baseline's own key in the JSON report: what it was made of
DEFAULT_TOLERANCE = 0.01  # the peak may move by this share before it is a change


def baseline(a: Analysis, target: Target, cancelled: Callable[[], bool] | None = None) -> dict:
    """The JSON report of the analysis `a` of `target` (compiled), with the
    configuration it was made of and its program's hash, as `--write` saves it."""
    out = a.to_dict()
    device = a.compiled.device if a.compiled is not None else a.config.device
    out[BASELINE_KEY] = {
        "policy": a.config.policy,
        "sites": {str(k): v for k, v in a.config.sites},
        "device": device,
        "device_kind": str(resolve_device(device).device_kind),
        # The mesh the arguments are sharded over (axis: size, in order; None:
        # none), and the one --mesh asked for: Contract 17, a check compares
        # only over the mesh its baseline was taken over.
        "mesh": _axes_dict(arguments_mesh_of(target, a.config)),
        "mesh_asked": _axes_dict(target.mesh),
        "program": program_key(target, a.config, cancelled=cancelled),
    }
    return out


def arguments_mesh_of(target: Target, config: Config) -> Axes | None:
    """The axes of the mesh the target's example arguments are sharded over,
    built for the configuration's device set (and the mesh asked for)."""
    args, kwargs = resolve_arguments(target, device_set(config.jax_device))
    return mesh_of(flatten_arguments(target.fn, args, kwargs, target.label).leaves)


def refuse_another_mesh(target: Target, saved: dict, config: Config) -> None:
    """A baseline taken over one mesh is not compared over another: its bytes
    per device are another split of the same arrays."""
    made = saved.get(BASELINE_KEY) or {}
    if "mesh" not in made:  # a baseline from before meshes were recorded
        return
    before, now = made["mesh"], _axes_dict(arguments_mesh_of(target, config))
    if _in_order(before) == _in_order(now):
        return
    was, is_now = _mesh_said(before), _mesh_said(now)
    asked = made.get("mesh_asked")
    fix = f"--mesh {mesh_words(tuple(asked.items()))}" if asked else "the baseline's devices"
    raise RematError(
        f"{target.label}: the baseline was taken over {was} and this check over {is_now}, "
        f"whose bytes per device are another split: check over the same mesh ({fix}), or "
        "write a new baseline with --write."
    )


def _axes_dict(axes: Axes | None) -> dict[str, int] | None:
    return dict(axes) if axes is not None else None


def _in_order(mesh: dict | None) -> list | None:
    """A mesh's axes as a list: their order is part of the mesh."""
    return list(mesh.items()) if mesh is not None else None


def _mesh_said(mesh: dict | None) -> str:
    return f"the mesh {mesh_words(tuple(mesh.items()))}" if mesh else "no mesh"


def config_of(saved: dict, declared: dict[str, Callable] | None) -> Config:
    """The configuration a baseline was made of."""
    made = saved.get(BASELINE_KEY) or {}
    sites = {int(k) if k.isdigit() else k: v for k, v in (made.get("sites") or {}).items()}
    return Config.make(made.get("policy", "as_written"), sites, made.get("device"), declared)


def residual_key(r: dict) -> tuple:
    """What a residual is across a refactor (a JSON report's residual)."""
    origin = r.get("origin") or {}
    source = origin.get("source") or r.get("source") or {}
    return (
        r["kind"],
        r.get("name") or origin.get("name"),
        r.get("argument"),
        origin.get("primitive") or r.get("primitive"),
        source.get("function"),
        os.path.basename(source.get("file") or ""),
        r["aval"],
        origin.get("trip_count"),
    )


def residual_words(r: dict) -> str:
    """`f32[32,128] tanh (named 'h') in layer at mlp.py:34`."""
    origin = r.get("origin") or {}
    source = origin.get("source") or r.get("source")
    what = (
        r.get("argument")
        and f"argument {r['argument']}"
        or (origin.get("primitive") or r.get("primitive") or r["kind"])
    )
    name = r.get("name") or origin.get("name")
    named = f" (named {name!r})" if name else ""
    where = ""
    if source:
        where = f" in {source['function']} at {os.path.basename(source['file'])}:{source['line']}"
    trips = f" ×{origin['trip_count']}" if origin.get("trip_count") else ""
    return f"{r['aval']} {what}{named}{trips}{where}"


@dataclass(frozen=True)
class Found:
    """A residual saved on one side only: in words (`residual_words`) and
    its bytes on a device."""

    words: str
    bytes: int


@dataclass
class Check:
    """A configuration now against its baseline.

    Attributes:
        target: the target's label.
        config: the configuration's label.
        causes: where the baseline's policies and now's differ (the outer
            policy, a checkpoint site's), in words: why residuals moved.
        appeared: residuals saved now and not in the baseline (`Found`s).
        disappeared: residuals in the baseline and not saved now.
        peak_before / peak_after: the compiled peak per device, bytes (None: not compiled).
        tolerance: the share the peak may move by.
        time_before / time_after: the step-time estimate, seconds, or None.
        jax_before / jax_after: the JAX versions of the baseline and of now.
        same_program: whether the program compiled now is the baseline's (equal
            lowered programs' hashes), or None where the baseline has none.
        notes: what else differs (the device, the step, the program), said.
    """

    target: str
    config: str
    causes: list[str] = field(default_factory=list)
    appeared: list[Found] = field(default_factory=list)
    disappeared: list[Found] = field(default_factory=list)
    peak_before: int | None = None
    peak_after: int | None = None
    tolerance: float = DEFAULT_TOLERANCE
    time_before: float | None = None
    time_after: float | None = None
    jax_before: str | None = None
    jax_after: str = jax.__version__
    same_program: bool | None = None  # None: the baseline has no program hash
    notes: list[str] = field(default_factory=list)

    @property
    def peak_moved(self) -> float | None:
        if not self.peak_before or self.peak_after is None:
            return None
        return (self.peak_after - self.peak_before) / self.peak_before

    @property
    def peak_changed(self) -> bool:
        moved = self.peak_moved
        return moved is not None and abs(moved) > self.tolerance

    @property
    def changed(self) -> bool:
        return bool(self.appeared or self.disappeared or self.peak_changed)

    def to_dict(self) -> dict:
        return {
            "target": self.target,
            "config": self.config,
            "changed": self.changed,
            "causes": list(self.causes),
            "residuals": {
                "appeared": [f.words for f in self.appeared],
                "disappeared": [f.words for f in self.disappeared],
            },
            "peak": {
                "before": self.peak_before,
                "after": self.peak_after,
                "moved": self.peak_moved,
                "tolerance": self.tolerance,
                "changed": self.peak_changed,
            },
            "time": {"before": self.time_before, "after": self.time_after},
            "jax": {"before": self.jax_before, "after": self.jax_after},
            "same_program": self.same_program,
            "notes": list(self.notes),
        }


def check(
    target: Target,
    saved: dict,
    tolerance: float = DEFAULT_TOLERANCE,
    config: Config | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Check:
    """Analyse and compile `target` under `config` (by default the baseline's
    own) and compare it with the baseline `saved` (a JSON report)."""
    _require_report(saved)
    config = config or config_of(saved, target.policies)
    refuse_another_mesh(target, saved, config)
    a = analyze_compiled(target, config=config, cancelled=cancelled)
    now = baseline(a, target, cancelled)
    result = Check(target.label, config.label(), tolerance=tolerance)
    result.causes = policy_changes(saved, now)
    only_before, only_now = unmatched(saved["residuals"], now["residuals"])
    result.appeared = [_found(r) for r in only_now]
    result.disappeared = [_found(r) for r in only_before]
    compiled_before, compiled_after = saved.get("compiled") or {}, now.get("compiled") or {}
    result.peak_before = _peak(compiled_before)
    result.peak_after = _peak(compiled_after)
    result.time_before = (saved.get("time") or {}).get("seconds")
    result.time_after = (now.get("time") or {}).get("seconds")
    result.jax_before = saved.get("jax_version")
    device_before = (saved.get(BASELINE_KEY) or {}).get("device")
    device_after = now[BASELINE_KEY]["device"]
    if device_before and device_after and device_before != device_after:
        result.notes.append(
            f"the baseline was compiled for {device_before}, this check for {device_after}"
        )
    program = (saved.get(BASELINE_KEY) or {}).get("program")
    if program is not None:
        same = program == now[BASELINE_KEY]["program"]
        result.same_program = same
        result.notes.append(
            "the same program as the baseline's (its lowered program's hash is equal)"
            if same
            else "a different program from the baseline's (its lowered program's hash differs)"
        )
    if compiled_before.get("step") and compiled_before.get("step") != compiled_after.get("step"):
        result.notes.append(
            f"the baseline compiled the {compiled_before['step']} step, this check the "
            f"{compiled_after.get('step')} step"
        )
    if not compiled_before.get("fits", True) or not compiled_after.get("fits", True):
        result.notes.append("a compile did not fit its device: its peak is not compared")
    return result


def unmatched(before: list[dict], after: list[dict]) -> tuple[list[dict], list[dict]]:
    """The residuals (a JSON report's) in `before` only and in `after` only.
    Alike (`residual_key`) is the same residual: those at the same line pair
    off first, then the rest in order (moved code), and what is left over on
    either side is a change, each at its own line."""
    sides: dict[tuple, tuple[list[dict], list[dict]]] = defaultdict(lambda: ([], []))
    for r in before:
        sides[residual_key(r)][0].append(r)
    for r in after:
        sides[residual_key(r)][1].append(r)
    only_before: list[dict] = []
    only_after: list[dict] = []
    for b, a in sides.values():
        b_left, a_left = _unpaired(b, a), _unpaired(a, b)
        moved = min(len(b_left), len(a_left))
        only_before += b_left[moved:]
        only_after += a_left[moved:]
    return only_before, only_after


def _unpaired(these: list[dict], others: list[dict]) -> list[dict]:
    """`these` less one for each of `others` said in the same words (the line included)."""
    left = Counter(residual_words(r) for r in others)
    out = []
    for r in these:
        words = residual_words(r)
        if left[words]:
            left[words] -= 1
        else:
            out.append(r)
    return out


def _found(r: dict) -> Found:
    return Found(residual_words(r), r.get("bytes_per_device", r.get("bytes", 0)))


def policy_changes(saved: dict, now: dict) -> list[str]:
    """Where the policies of the baseline and of now differ, in words: the
    outer policy, and each checkpoint site's (written in the code, or set by
    --site), sites matched by id."""
    out = []
    outer = ((saved.get(BASELINE_KEY) or {}).get("policy"), now[BASELINE_KEY]["policy"])
    if outer[0] is not None and outer[0] != outer[1]:
        out.append(f"the outer policy was {outer[0]} in the baseline, {outer[1]} now")
    sites_before = {s["id"]: s for s in saved.get("sites") or []}
    sites_now = {s["id"]: s for s in now.get("sites") or []}
    # Sites alike (one line, run in a loop) changed alike are said once.
    changed: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for sid, site in sites_now.items():
        was = sites_before.get(sid)
        if was is not None and _site_policy(was) != _site_policy(site):
            changed[_site_where(site), _site_policy(was), _site_policy(site)].append(sid)
    for (where, was_policy, now_policy), ids in changed.items():
        which = f"site {ids[0]}" if len(ids) == 1 else f"sites {', '.join(map(str, ids))}"
        out.append(
            f"{which} ({where}): the policy was {was_policy} in the baseline, {now_policy} now"
        )
    if len(sites_before) != len(sites_now):
        out.append(
            f"the code has {len(sites_now)} checkpoint site(s) now, the baseline "
            f"{len(sites_before)}"
        )
    return out


def _site_policy(site: dict) -> str:
    """What the analysis applied at a site (its override, else its written policy)."""
    return site.get("override") or site["policy"]


def _site_where(site: dict) -> str:
    """`attention at model.py:20`."""
    source = site.get("source")
    where = f" at {os.path.basename(source['file'])}:{source['line']}" if source else ""
    return f"{site['function']}{where}"


def _peak(compiled: dict) -> int | None:
    """A report's compiled peak, where it fit its device."""
    return compiled.get("peak_bytes") if compiled and compiled.get("fits", True) else None


def _require_report(saved: object) -> None:
    if not isinstance(saved, dict) or saved.get("schema") != 1 or "residuals" not in saved:
        raise RematError(
            "the baseline is not a remat-tui JSON report (schema 1, with residuals): "
            "write one with remat-tui check FILE[:NAME] --write BASELINE.json"
        )
