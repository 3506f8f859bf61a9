"""Provides `remat-tui check`: a guard for upgrades and refactors.
`--write BASELINE.json` saves one configuration's compiled JSON report as
the baseline; `--against BASELINE.json` compares with it
(core/search/check.py), with the baseline's own policy, sites, device and
mesh unless given: exit status 0 unchanged, 1 changed, 2 bad input.

Imports only the standard library and light modules at module level.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from remat_tui.cli.options import (
    Commands,
    compile_options,
    output_options,
    policy_option,
    site_overrides,
    target_options,
)
from remat_tui.errors import RematError

if TYPE_CHECKING:
    from remat_tui.cli.rendering import Rendered
    from remat_tui.core.setup.config import Config
    from remat_tui.registry import Target


def add_parser(commands: Commands) -> None:
    check = commands.add_parser(
        "check",
        help="compare with a saved baseline (for CI: JAX upgrades, refactors)",
        description="Analyse and compile one configuration and compare it with a baseline "
        "saved by --write: the residuals (by where they come from and their names), the "
        "compiled peak and the step-time estimate. Exit 0 unchanged, 1 changed (residuals "
        "appeared or disappeared, or the peak moved by more than --tolerance), 2 bad input. "
        "With --against, the baseline's own policy, sites and device are used unless given.",
    )
    target_options(check)
    policy_option(check, default=None, help="the outer policy (default: the baseline's, or "
                  "as_written with --write)")  # fmt: skip
    output_options(check, None)
    compile_options(check, search=False)
    saved = check.add_mutually_exclusive_group(required=True)
    saved.add_argument("--against", metavar="BASELINE.json", help="the baseline to compare with")
    saved.add_argument(
        "--write", metavar="BASELINE.json", help="save this configuration's report as the baseline"
    )
    check.add_argument(
        "--tolerance",
        default="1%",
        metavar="SHARE",
        help="how far the compiled peak may move and still be unchanged: 1%% (the default), "
        "0.5%%, 0.02",
    )


def check(opts: argparse.Namespace) -> dict:
    """The tolerance as a share, and the baseline read, before JAX loads; the
    mesh the baseline asked for, and its device, where --mesh and --device
    are not given (the headless run builds the mesh over that device)."""
    out: dict = {"tolerance": tolerance(opts.tolerance)}
    if opts.against is not None:
        saved = out["baseline"] = read_baseline(opts.against)
        if opts.mesh is None:
            out["mesh"] = mesh_asked(saved)
        if opts.device is None:
            out["mesh_device"] = device_of(saved)
    return out


def tolerance(text: str) -> float:
    """`1%` or `0.01` -> 0.01."""
    raw = text.strip()
    try:
        share = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        share = -1.0
    if not 0 <= share < 1 or (not raw.endswith("%") and share >= 1):
        raise RematError(
            f"--tolerance {text!r}: give the share the peak may move by, as a percentage "
            "(1%, 0.5%) or a fraction (0.01)."
        )
    return share


def read_baseline(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            saved = json.load(fh)
    except FileNotFoundError:
        raise RematError(
            f"{path}: no such baseline. Write one first: remat-tui check FILE[:NAME] --write {path}"
        ) from None
    except (OSError, ValueError) as exc:
        raise RematError(f"{path}: cannot read the baseline as JSON ({exc}).") from None
    if not isinstance(saved, dict) or saved.get("schema") != 1 or "residuals" not in saved:
        raise RematError(
            f"{path}: not a remat-tui baseline (a JSON report, schema 1, with residuals). "
            "Write one with remat-tui check FILE[:NAME] --write BASELINE.json."
        )
    return saved


def mesh_asked(saved: dict) -> tuple[tuple[str, int], ...] | None:
    """The mesh a baseline's --mesh asked for (its axes), or None."""
    asked = (saved.get("check") or {}).get("mesh_asked")
    return tuple((str(k), int(v)) for k, v in asked.items()) if asked else None


def device_of(saved: dict) -> str | None:
    """The device a baseline was compiled for."""
    return (saved.get("check") or {}).get("device")


def run(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    from remat_tui.core.search import check as checking
    from remat_tui.core.setup.config import Config

    sites = site_overrides(opts.site)
    if opts.write is not None:
        from remat_tui.core.units import human_bytes
        from remat_tui.core.xla.compiled_analysis import analyze_compiled
        from remat_tui.report.write import write_atomic

        written = Config.make(opts.policy or "as_written", sites, opts.device, target.policies)
        a = analyze_compiled(target, config=written)
        path = write_atomic(opts.write, json.dumps(checking.baseline(a, target), indent=2) + "\n")
        peak = (
            f"compiled peak {human_bytes(a.compiled.peak_bytes)} on {a.compiled.device}"
            if a.compiled.fits
            else f"does not fit {a.compiled.device}"
        )
        said = f"baseline: {len(a.residuals)} residuals, {peak}; written to {path}\n"
        return said, a.warnings, lambda: 0
    saved = checks["baseline"]
    config: Config | None = None
    if opts.policy is not None or sites or opts.device is not None:
        base = checking.config_of(saved, target.policies)
        config = Config.make(
            opts.policy or base.policy,
            sites or dict(base.sites),
            opts.device or base.device,
            target.policies,
        )
    result = checking.check(target, saved, checks["tolerance"], config)
    from remat_tui.report.check import render

    return render(result, fmt), [], lambda: 1 if result.changed else 0
