"""Provides the plain-text report: what a terminal user reads first."""

from __future__ import annotations

from remat_tui.core.model import Analysis
from remat_tui.report.units import human_bytes, summary


def render(a: Analysis) -> str:
    lines = [
        f"target  {a.target_file}:{a.target_name}" if a.target_file else f"target  {a.target_name}",
        f"policy  {a.policy}",
        f"device  {a.device.get('platform')}:{a.device.get('id')}",
        f"python  {a.python}",
        "",
        *(f"warning: {w}" for w in a.warnings),
        *([""] if a.warnings else []),
        "saved residuals (as jax.ad_checkpoint.print_saved_residuals prints them):",
    ]
    width = max((len(human_bytes(r.bytes)) for r in a.residuals), default=0)
    lines += [f"  {human_bytes(r.bytes):>{width}}  {r.text}" for r in a.residuals]
    lines += ["", summary(a)]
    return "\n".join(lines) + "\n"
