"""Provides compare (Contract 6): one row of costs per configuration, with the
Pareto-optimal rows marked.

Every row is a lean `analyze` (no jaxpr text), so a row's numbers are the
same as the full analysis of that configuration shows. The configurations
are built-in policies, the target's own, the checkpoint_name save/offload
sets, and each policy at each checkpointed function; a comparison's rows are
Configs, so a row opens in the app as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from remat_tui.core import policies
from remat_tui.core.analysis import Cancelled, analyze, as_target
from remat_tui.core.config import Config
from remat_tui.core.model import Analysis
from remat_tui.core.notes import Baseline, notes_for


@dataclass
class Row:
    config: Config
    python: str
    device_bytes: int
    host_bytes: int
    recompute_flops: int
    forward_flops: int
    residuals: tuple[str, ...]  # JAX's texts, for diff
    compiled: dict | None = None
    pareto: bool = False
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # its compile failed (other than running out of memory)

    @property
    def memory(self) -> int:
        """What the Pareto front and suggest weigh: compiled peak when known
        (for a compile that did not fit, what XLA said it needed), else the
        residual bytes on device."""
        if self.compiled and self.compiled.get("peak_bytes"):
            return self.compiled["peak_bytes"]
        return self.device_bytes

    @property
    def fits(self) -> bool:
        """Whether it fits the device: compiled and XLA took it, or not compiled."""
        return self.error is None and (self.compiled or {}).get("fits", True)

    @property
    def recompute_share(self) -> float | None:
        return self.recompute_flops / self.forward_flops if self.forward_flops else None

    def to_dict(self) -> dict:
        return {
            "policy": self.config.policy,
            "sites": {str(k): v for k, v in self.config.sites},
            "python": self.python,
            "device_bytes": self.device_bytes,
            "host_bytes": self.host_bytes,
            "recompute_flops": self.recompute_flops,
            "forward_flops": self.forward_flops,
            "compiled": self.compiled,
            "pareto": self.pareto,
            "notes": list(self.notes),
            "error": self.error,
        }


@dataclass
class Comparison:
    target_file: str | None
    target_name: str
    device: dict
    rows: list[Row]
    seconds: float

    def to_dict(self) -> dict:
        return {
            "schema": 1,
            "target": {"file": self.target_file, "name": self.target_name},
            "device": dict(self.device),
            "rows": [r.to_dict() for r in self.rows],
        }


def row_of(a: Analysis, compiled: dict | None = None) -> Row:
    flops = a.flops
    return Row(
        config=a.config,
        python=a.python,
        device_bytes=a.totals.device_bytes,
        host_bytes=a.totals.host_bytes,
        recompute_flops=flops["recompute"],
        forward_flops=flops["forward"],
        residuals=tuple(r.text for r in a.residuals),
        compiled=compiled,
    )


def compare(
    fn,
    args: tuple | None = None,
    kwargs: dict | None = None,
    policies: list | None = None,
    sites: dict | None = None,
    compiled: bool = False,
    device: str | None = None,
    cancelled: Callable[[], bool] | None = None,
    progress: Callable[[int, int, Config], None] | None = None,
) -> Comparison:
    """Rows for `policies` (outer specs; default: every configuration worth
    comparing, see `candidates`), each with `sites` as the site overrides."""
    start = time.perf_counter()
    target = as_target(fn, args, kwargs)
    base = Config.make(sites=sites, device=device, declared=target.policies)
    baseline_analysis = analyze(target, config=base, row_only=True, cancelled=cancelled)
    if policies is None:
        configs = candidates(target, baseline_analysis, base)
    else:
        configs = [base.with_policy(canonical_spec(p, target)) for p in policies]
    rows = evaluate(target, configs, baseline_analysis, compiled, cancelled, progress)
    mark_pareto(rows)
    return Comparison(
        target.file,
        target.name,
        baseline_analysis.device,
        rows,
        time.perf_counter() - start,
    )


def canonical_spec(text: str, target) -> str:
    """A policy spec in its one spelling, the target's own policies known."""
    return policies.parse(text, target.policies).canonical


def evaluate(target, configs, baseline: Analysis, compiled, cancelled, progress) -> list[Row]:
    """One row per config (the baseline's analysis is reused for its own)."""
    reference = Baseline.of(baseline)
    rows = []
    for i, config in enumerate(configs):
        if cancelled is not None and cancelled():
            raise Cancelled()
        if progress is not None:
            progress(i, len(configs), config)
        a = baseline if config == baseline.config else None
        if a is None:
            a = analyze(target, config=config, row_only=True, cancelled=cancelled)
        row = row_of(a)
        row.notes = notes_for(a, reference)
        if compiled:
            compile_row(target, row, cancelled)
        rows.append(row)
    return rows


def compile_row(target, row: Row, cancelled=None) -> None:
    """Compile a row's configuration. A compile that does not fit is the row's
    answer (`fits` False); any other failure is the row's `error`: neither
    stops a comparison or a search."""
    from remat_tui.core.compiled import compile_costs
    from remat_tui.errors import RematError

    try:
        row.compiled = compile_costs(target, row.config, cancelled=cancelled).to_dict()
    except RematError as exc:
        row.error = exc.message


def candidates(target, baseline: Analysis, base: Config) -> list[Config]:
    """Every built-in policy and the target's own (outer); the name sets (each
    name saved alone, all names, each offloaded alone, all offloaded), at the
    checkpointed functions when the code has sites, else outer; and for code
    with sites, each built-in policy at each checkpointed function."""
    outer = [*policies.builtin_specs(), *target.policies]
    names = [n.name for n in baseline.names]
    name_specs = []
    if names:
        name_specs += [policies.names_policy([n], []).canonical for n in names]
        name_specs.append(policies.names_policy(names, []).canonical)
        name_specs += [policies.names_policy([], [n]).canonical for n in names]
        name_specs.append(policies.names_policy([], names).canonical)
    functions = list(dict.fromkeys(s.function for s in baseline.sites))
    configs = [base.with_policy(canonical_spec(p, target)) for p in outer]
    if functions:
        for function in functions:
            for spec in [*outer, *name_specs]:
                spec = canonical_spec(spec, target)
                configs.append(base.at_function(baseline.sites, function, spec))
    else:
        configs += [base.with_policy(spec) for spec in name_specs]
    return list(dict.fromkeys(configs))


def mark_pareto(rows: list[Row]) -> None:
    """A row is Pareto-optimal when it fits and no other row that fits needs
    no more memory and no more recomputation, and less of one."""
    fitting = [r for r in rows if r.fits]
    for row in rows:
        row.pareto = row.fits and not any(
            other.memory <= row.memory
            and other.recompute_flops <= row.recompute_flops
            and (other.memory < row.memory or other.recompute_flops < row.recompute_flops)
            for other in fitting
        )
