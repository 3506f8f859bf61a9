"""Analysis cost vs JAX's own floor, side by side in one process.

Floor: one `make_jaxpr` of the vjp (return_shape=True), one of the backward
pass, and `str()` of both jaxprs. Ours: `remat_tui.analyze` (residuals, both
texts, line maps, names, the JSON dict). Also the reference notebook's way:
`print_saved_residuals` plus `print_fwd_bwd`'s two traces.

Each measurement wraps the target in a fresh function object, so no trace
cache is shared. Runs alternate to spread machine noise over both sides.

    python bench/bench_analyze.py [--policy SPEC] [--target unrolled] [--repeat 5]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import os
import statistics
import sys
import time

import jax
from jax.tree_util import tree_flatten, tree_unflatten

import remat_tui
from remat_tui.core.setup import loading, policies

HERE = os.path.dirname(os.path.abspath(__file__))


def fresh(fn, spec, declared):
    def wrapper(*a, **kw):
        return fn(*a, **kw)

    if spec.kind == policies.AS_WRITTEN:
        return wrapper
    return jax.checkpoint(wrapper, policy=policies.build(spec, declared))


def trace_both(fn, args, kwargs):
    """The forward (vjp) and backward closed jaxprs of `fn`, and the residual
    count: the two traces every analysis needs, as JAX's own tools make them."""
    leaves, tree = tree_flatten((args, kwargs))

    def flat(*x):
        a, kw = tree_unflatten(tree, x)
        return fn(*a, **kw)

    closed, (out, vjp) = jax.make_jaxpr(lambda *a: jax.vjp(flat, *a), return_shape=True)(*leaves)
    res, res_tree = tree_flatten(vjp)
    cts, ct_tree = tree_flatten(out)

    def backward(*x):
        return tree_unflatten(res_tree, x[: len(res)])(tree_unflatten(ct_tree, x[len(res) :]))

    return closed, jax.make_jaxpr(backward)(*res, *cts), len(res)


def floor(fn, args, kwargs):
    closed, bwd, _ = trace_both(fn, args, kwargs)
    return len(str(closed.jaxpr)) + len(str(bwd.jaxpr))


def floor_timed(fn, args, kwargs) -> tuple[float, float]:
    """`floor`, timed in two parts: (the two traces, printing both jaxprs)."""
    start = time.perf_counter()
    closed, bwd, _ = trace_both(fn, args, kwargs)
    traced = time.perf_counter()
    len(str(closed.jaxpr)) + len(str(bwd.jaxpr))
    return traced - start, time.perf_counter() - traced


def ours(fn, args, kwargs, target):
    t = remat_tui.Target(fn=fn, name=target.name, args=args, kwargs=kwargs, file=target.file)
    return remat_tui.analyze(t).to_dict()


def notebook_way(fn, args, kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        jax.ad_checkpoint.print_saved_residuals(fn, *args, **kwargs)
    return floor(fn, args, kwargs)  # print_fwd_bwd traces forward and backward again


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="unrolled")
    parser.add_argument("--policy", default="dots_saveable")
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    target = loading.load_targets(os.path.join(HERE, "..", "examples", "transformer.py"))[
        opts.target
    ]
    args, kwargs = loading.resolve_arguments(target)
    spec = policies.parse(opts.policy, target.policies)
    sides = {
        "floor": lambda f: floor(f, args, kwargs),
        "remat-tui": lambda f: ours(f, args, kwargs, target),
        "notebook": lambda f: notebook_way(f, args, kwargs),
    }
    times: dict[str, list[float]] = {k: [] for k in sides}
    ours(fresh(target.fn, spec, target.policies), args, kwargs, target)  # warm imports
    for i in range(opts.repeat):
        for name, run in sides.items():
            f = fresh(target.fn, spec, target.policies)
            gc.collect()  # start each side with the same heap, not the last side's garbage
            start = time.perf_counter()
            run(f)
            times[name].append(time.perf_counter() - start)
        print(
            f"  round {i + 1}/{opts.repeat}: "
            + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()),
            file=sys.stderr,
        )
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"target {opts.target}, policy {spec.canonical}, median of {opts.repeat}")
    for k, v in med.items():
        print(f"  {k:10s} {v:.3f} s")
    print(f"remat-tui / floor    = {med['remat-tui'] / med['floor']:.3f}  (budget 1.15)")
    print(f"notebook / remat-tui = {med['notebook'] / med['remat-tui']:.3f}")


if __name__ == "__main__":
    main()
