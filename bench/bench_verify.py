"""What verifying costs (issue 43's bar: at most 3x one measured step):
`verify` of one configuration against `measure` of the same configuration,
side by side in one process, alternately, each on a fresh target object
(nothing cached: no compile, no reference run), and the ratio.

measure: the step compiled once, one warm-up run and five timed runs.
verify: the step compiled under the configuration and as the code is
written, the code as written compiled once more with XLA's backend
optimisations off (for the tolerance), and one run of each.

    python bench/bench_verify.py [--repeat 3] [--policy nothing_saveable] [FILE[:NAME] ...]
    python bench/bench_verify.py --shared [--repeat 3] ...

`--shared`: what `--measure --verify` costs (issue 43: they share their
runs, core/xla/run/shared_runs.py) against `--measure` alone and verify alone,
side by side in one process, in turn, each on a fresh target: `both` is
measure within `sharing`, then verify, as report --measure --verify runs
them. Printed: the medians, both / measure, both / (measure + verify), and
what verifying adds to a measure, (both - measure) / verify.

Default targets: examples/mlp.py and tests/models/scan_stack.py (16 scanned
layers).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time

os.environ.setdefault("REMAT_TUI_NO_CACHE", "1")  # every compile timed is made

from remat_tui.core.setup.config import Config  # noqa: E402
from remat_tui.core.setup.loading import load_target  # noqa: E402
from remat_tui.core.xla.compile import costs as compiled  # noqa: E402
from remat_tui.core.xla.run import shared_runs  # noqa: E402
from remat_tui.core.xla.run.measure import measure  # noqa: E402
from remat_tui.core.xla.verify.runs import verify  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGETS = [os.path.join(ROOT, "examples", "mlp.py"),
           os.path.join(ROOT, "tests", "models", "scan_stack.py")]  # fmt: skip


def timed(run, target, config) -> float:
    """Seconds `run` takes on a fresh copy of `target` (nothing cached)."""
    compiled.clear_cache()
    shared_runs.forget()
    fresh = dataclasses.replace(target)
    start = time.perf_counter()
    run(fresh, config)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", default=TARGETS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--policy", default="nothing_saveable")
    parser.add_argument("--shared", action="store_true", help="measure and verify together")
    opts = parser.parse_args()
    if opts.shared:
        shared(opts)
        return
    for ref in opts.targets:
        loaded = load_target(ref)
        config = Config.make(opts.policy, declared=loaded.policies)
        ratios, measured, verified = [], [], []
        for _ in range(opts.repeat):
            m = timed(measure, loaded, config)
            v = timed(verify, loaded, config)
            measured.append(m)
            verified.append(v)
            ratios.append(v / m)
        print(
            f"{os.path.relpath(ref, ROOT)} ({config.label()}): measure "
            f"{statistics.median(measured):.2f} s, verify {statistics.median(verified):.2f} s, "
            f"ratio median {statistics.median(ratios):.2f} (max {max(ratios):.2f}; bar 3.00)"
        )


def both(target, config) -> None:
    """report --measure --verify's two steps: the measure keeps its first run."""
    with shared_runs.sharing(True):
        measure(target, config)
    verify(target, config)


def shared(opts: argparse.Namespace) -> None:
    sides = {"measure": measure, "verify": verify, "both": both}
    for ref in opts.targets:
        loaded = load_target(ref)
        config = Config.make(opts.policy, declared=loaded.policies)
        times: dict[str, list[float]] = {name: [] for name in sides}
        order = list(sides)
        for _ in range(opts.repeat):
            for name in order:
                times[name].append(timed(sides[name], loaded, config))
            order = order[1:] + order[:1]  # each side first in turn
        m, v, b = (statistics.median(times[name]) for name in ("measure", "verify", "both"))
        rounds = zip(times["both"], times["measure"], times["verify"], strict=True)
        added = [(x - y) / z for x, y, z in rounds]
        print(
            f"{os.path.relpath(ref, ROOT)} ({config.label()}), {opts.repeat} rounds: "
            f"measure {m:.2f} s, verify {v:.2f} s, both {b:.2f} s; "
            f"both / measure {b / m:.2f}, both / (measure + verify) {b / (m + v):.2f}, "
            f"verify's addition to a measure {statistics.median(added):.2f} of verify alone"
        )


if __name__ == "__main__":
    main()
