"""What FLOP counting (core/costs/flops.py, Contract 6) adds to one analysis.

Measured in parts, because the whole analysis varies by more run to run than
counting costs: the two `flops.count` calls (forward and backward jaxprs) and
the FLOP bookkeeping inside `recomputation.recomputation` (timed as is, and with the
flops hooks replaced by no-op stubs; the difference is what counting adds).
The sum is set against the median time of `remat_tui.analyze` on the same
target and policy.

    python bench/bench_flops.py [--target unrolled] [--policy dots_saveable] [--repeat 7]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from unittest import mock

import jax

import remat_tui
from remat_tui.core import jaxcompat as jc
from remat_tui.core.costs import flops
from remat_tui.core.setup import loading, policies
from remat_tui.core.trace import recomputation

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_analyze import trace_both  # noqa: E402


def jaxprs(target, spec):
    """The forward (vjp) and backward jaxprs analyze traces, and the residual count."""
    args, kwargs = loading.resolve_arguments(target)
    fn = target.fn
    if spec.kind != policies.AS_WRITTEN:
        fn = jax.checkpoint(fn, policy=policies.build(spec, target.policies))
    closed, bwd, num_res = trace_both(fn, args, kwargs)
    return closed.jaxpr, bwd.jaxpr, num_res


def median_seconds(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()  # each run starts with the same heap, not the last run's garbage
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="unrolled")
    parser.add_argument("--policy", default="dots_saveable")
    parser.add_argument("--repeat", type=int, default=7)
    opts = parser.parse_args()
    target = loading.load_targets(os.path.join(HERE, "..", "examples", "transformer.py"))[
        opts.target
    ]
    spec = policies.parse(opts.policy, target.policies)
    fwd, bwd, num_res = jaxprs(target, spec)
    res, cts = set(bwd.invars[:num_res]), set(bwd.invars[num_res:])

    analyze = median_seconds(lambda: remat_tui.analyze(target, policy=opts.policy), opts.repeat)
    count = median_seconds(lambda: (flops.count(fwd), flops.count(bwd)), opts.repeat)
    marked = median_seconds(lambda: recomputation.recomputation(bwd, res, cts), opts.repeat)
    with (
        mock.patch.object(recomputation, "has_own_rule", lambda eqn: False),
        mock.patch.object(recomputation, "eqn_flops", lambda eqn: 0),
        mock.patch.object(flops, "combine", lambda eqn, subs: flops.Count()),
    ):
        unmarked = median_seconds(lambda: recomputation.recomputation(bwd, res, cts), opts.repeat)
    added = count + max(marked - unmarked, 0.0)
    a = remat_tui.analyze(target, policy=opts.policy)
    print(f"target {opts.target}, policy {spec.canonical}, median of {opts.repeat}")
    print(f"  equations        forward {_eqns(fwd)}, backward {_eqns(bwd)} (bodies included)")
    print(f"  flops            {a.flops} exact={a.flops_exact}")
    print(f"  analyze          {analyze * 1000:8.1f} ms")
    print(f"  flops.count x2   {count * 1000:8.1f} ms")
    print(
        f"  recomputation    {marked * 1000:8.1f} ms ({unmarked * 1000:.1f} ms with flops stubbed)"
    )
    print(f"  counting adds    {added * 1000:8.1f} ms = {100 * added / analyze:.2f}% (budget 5%)")


def _eqns(jaxpr) -> int:
    return sum(1 for _ in jc.nested_eqns(jaxpr))


if __name__ == "__main__":
    main()
