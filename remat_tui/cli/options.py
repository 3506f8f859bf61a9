"""Provides the options the commands share, each with the check that goes
with it: the target and its sites, the policy, a structure, the output,
compiling, skipping, measuring (`check_measure`) and `--verify`
(`refuse_topology`). A command's module adds the ones it takes to its parser
and calls their checks from its own `check`.

Imports only the standard library and light modules, so `--help` is instant.
"""

from __future__ import annotations

import argparse
from typing import Any, Protocol

from remat_tui.core.setup.config import RUNS  # light: no jax
from remat_tui.errors import RematError
from remat_tui.report import FORMATS  # light: the report modules import no jax

SITE_HELP = (
    "set the policy of a jax.checkpoint in the code: a site id or the checkpointed "
    "function's name, e.g. --site block=nothing_saveable (as_written removes that "
    "checkpoint); repeatable"
)
COMPILED_HELP = (
    "also compile each configuration's step (the loss and its gradient with respect to "
    "the first argument or the target's params=, as jax.value_and_grad takes it; or the "
    "training step), without running it, for its memory and time"
)


class Commands(Protocol):
    """What `ArgumentParser.add_subparsers` returns, as the commands use it
    (argparse keeps its class private)."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


def target_options(parser: argparse.ArgumentParser) -> None:
    """What every command takes: the target, its site overrides, the device
    and the mesh."""
    parser.add_argument(
        "target",
        metavar="FILE[:NAME]",
        help="a Python file registering targets with @remat_tui.target; "
        ":NAME picks one when it has several",
    )
    parser.add_argument(
        "--site", action="append", default=[], metavar="ID|FUNCTION=SPEC", help=SITE_HELP
    )
    parser.add_argument(
        "--device",
        default=None,
        metavar="D",
        help=(
            "device to analyse on, e.g. cpu:0, gpu:1 or tpu:v5e:2x2 (default: JAX's default; "
            "cpu:1 and up need XLA_FLAGS=--xla_force_host_platform_device_count=N)"
        ),
    )
    parser.add_argument(
        "--mesh",
        default=None,
        metavar="AXIS=N,...",
        help=(
            "the mesh to build over the chosen device set's devices, e.g. data=4,model=2, "
            "for a target whose args factory takes a parameter named mesh "
            "(args=lambda mesh: ...); its sizes multiply to the number of devices"
        ),
    )


def site_overrides(options: list[str]) -> dict:
    """`--site` options -> {site id or function name: spec}; the last one for a key wins."""
    from remat_tui.core.setup.config import parse_site_option

    return dict(parse_site_option(text) for text in options)


def policy_option(parser: argparse.ArgumentParser, **kwargs: Any) -> None:
    kwargs.setdefault("default", "as_written")
    kwargs.setdefault(
        "help",
        "a jax.checkpoint policy, written as after jax.checkpoint_policies. "
        "(default: as_written, no checkpoint)",
    )
    parser.add_argument("--policy", metavar="SPEC", **kwargs)


def structure_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--structure",
        default=None,
        metavar="SPEC",
        help="rebuild a scan of the code: nested(G) (its layers as G checkpointed groups) or "
        "split(K, POLICY_A, POLICY_B) (its first K layers under A, the rest under B); "
        "scan=I picks the scan where there are several. The report's python is the code "
        "to write",
    )


def output_options(parser: argparse.ArgumentParser, compiled_help: str | None) -> None:
    """What every headless command takes: format and output; and compiling,
    where the command has a use for it."""
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="output format (default: from -o's extension, .json .md .html .txt; else text)",
    )
    parser.add_argument(
        "-o", "--output", metavar="PATH", help="write to PATH (atomically) instead of stdout"
    )
    if compiled_help is not None:
        parser.add_argument("--compiled", action="store_true", help=compiled_help)


def compile_options(parser: argparse.ArgumentParser, search: bool) -> None:
    """Where compiles are remembered and, for a search (`search`), where they
    run. The headless run applies them (`--no-cache`, `--jobs`, `--cluster`)."""
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the compile cache (remat-tui cache shows it); "
        "every program is compiled",
    )
    if not search:
        return
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="compile in N worker processes at once (default: the machine's cores and memory, "
        "once a compile takes seconds; 1: one at a time, here)",
    )
    parser.add_argument(
        "--cluster",
        choices=("ray",),
        default=None,
        help="run the compiles as tasks on a Ray cluster (RAY_ADDRESS, else a local Ray; "
        "needs the ray extra); RAY_ADDRESS set does the same",
    )


def skip_option(parser: argparse.ArgumentParser) -> None:
    """Candidates a search leaves out (core/search/configs/skips.py)."""
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="SPEC|ID=SPEC",
        help="leave out every candidate with this policy (at that checkpoint, with ID= or "
        "FUNCTION=); repeatable; never the code as written",
    )


def measure_options(parser: argparse.ArgumentParser) -> None:
    """Running the compiled step on the device, and the CPU's calibration for
    the estimate: where a command can rank by time. `check_measure` checks
    them; the headless run applies `--recalibrate`."""
    parser.add_argument(
        "--measure",
        action="store_true",
        help="also run each compiled step on the device (a local one: not a TPU topology) "
        "and time it; measured times rank where there are some (implies --compiled)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=RUNS,
        metavar="N",
        help="with --measure: timed runs of each step, after one warm-up (default %(default)s)",
    )
    parser.add_argument(
        "--recalibrate",
        action="store_true",
        help="measure this CPU's rates again for the step-time estimate, and keep them "
        "(they are measured once per machine and kept in remat-tui's cache folder)",
    )


def check_measure(opts: argparse.Namespace) -> None:
    """`measure_options`' sense, before JAX loads: --runs only with --measure,
    and at least one; --measure implies --compiled."""
    if opts.measure:
        if opts.runs < 1:
            raise RematError(
                f"--runs {opts.runs}: measuring needs at least one timed run; give --runs 1 "
                f"or more (default {RUNS})."
            )
        opts.compiled = True
    elif opts.runs != RUNS:
        raise RematError("--runs is for --measure; add --measure to run the compiled steps.")


def verify_option(parser: argparse.ArgumentParser, what: str) -> None:
    """`--verify` on report, compare, suggest and fit: `what` says what is
    verified and what comes of a difference. `refuse_topology` checks it."""
    parser.add_argument(
        "--verify",
        action="store_true",
        help=f"{what} (run on the device against the code as written with the same inputs, "
        "as remat-tui verify does; not on a deviceless TPU topology)",
    )


def refuse_topology(opts: argparse.Namespace) -> None:
    """--verify runs steps: on a deviceless TPU topology, one line and exit 2
    before anything is compiled, claiming nothing (as verify does)."""
    if not getattr(opts, "verify", False):
        return
    from remat_tui.core.setup.devices import device_label, resolve_device, topology_of

    dev = resolve_device(opts.device)
    if topology_of(dev) is not None:
        raise RematError(
            f"--verify runs the step, and {device_label(dev)} is a deviceless TPU topology: "
            "it compiles here but cannot run a step, so nothing would be verified and nothing "
            "is claimed. Verify on the TPU itself (--device tpu:0), or drop --verify."
        )


def size_of(option: str, value: str) -> int:
    """The bytes an option's SIZE gives (`512MiB`, `1.5e9`); bad input is a
    RematError naming the option."""
    from remat_tui.core.units import parse_size

    try:
        return parse_size(value)
    except RematError as exc:
        raise RematError(f"{option}: {exc.message}") from None
