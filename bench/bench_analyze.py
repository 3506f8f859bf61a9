"""One analysis against JAX's floor and against the seeds' method, side by
side in one process.

- floor: what any tool showing the residuals' two programs must do: one
  `make_jaxpr` of the vjp (return_shape=True), one of the backward pass, and
  `str()` of both jaxprs.
- seeds: the reference notebook's way (JAX's "Practical examples" for remat,
  /work/shared/reference/jax-remat-practical-examples.md):
  `jax.ad_checkpoint.print_saved_residuals(f, *args)` and then
  `print_fwd_bwd(f, *args)` as the notebook defines it: a `make_jaxpr` of the
  vjp, the vjp itself, a `make_jaxpr` of the backward pass, `str()` of both
  jaxprs. The targets' arguments are `jax.ShapeDtypeStruct`s (nothing is
  allocated), so the notebook's eager `jax.vjp(f_, *args)` is evaluated
  abstractly (`jax.eval_shape`), and its rich table is left out: drawing
  10,000 lines of text is display, which the app does per screenful.
- remat-tui: `remat_tui.analyze(target)` (residuals with their origins,
  both texts with their line maps, names, sites, FLOPs): what the app's first
  paint and a search's analyses read. Each residual's story is told when
  first read (core/trace/story.py `Stories`), so not here.
- json: `remat_tui.analyze(target).to_dict()`, the JSON report
  (`remat-tui report --format json`): the same, with every story told.

Each measurement wraps the target in a fresh function object, so no trace
cache is shared between sides (within a side, what JAX caches is used as it
would be). The sides alternate, in a rotating order, several rounds, so that a
shared, noisy machine touches them alike; each side starts after a full
collection. Two figures per side: the call alone, and the call plus one full
collection of what it left behind (`+ collect`): the cost of its garbage,
which a program pays sooner or later. Times are CPU time of this process
(`time.process_time`: tracing runs on one thread), which other work on a
shared machine disturbs far less than wall time; `--wall` for wall time.

`--fresh` runs each side in a new process instead, as `remat-tui report`
does one analysis: the call alone, after the imports (remat-tui's modules
that analyze imports on first use included), JAX's caches empty but for what
the imports did.

    python bench/bench_analyze.py [--policy SPEC] [--target unrolled] [--repeat 7] [--fresh]

Bars: remat-tui / floor <= 1.0 and remat-tui / seeds <= 0.9; the JSON's
ratios are printed beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import statistics
import subprocess
import sys
import time

import jax
import jax.ad_checkpoint
from jax.tree_util import tree_flatten, tree_unflatten

import remat_tui
from remat_tui.core.setup import loading, policies

HERE = os.path.dirname(os.path.abspath(__file__))
BARS = {"floor": 1.0, "seeds": 0.9}


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


def ours(fn, args, kwargs, target):
    t = remat_tui.Target(fn=fn, name=target.name, args=args, kwargs=kwargs, file=target.file)
    return remat_tui.analyze(t)


def ours_json(fn, args, kwargs, target):
    return ours(fn, args, kwargs, target).to_dict()


def print_fwd_bwd(f, *args, **kwargs) -> str:
    """The reference notebook's helper, line for line, but for the eager vjp
    (evaluated abstractly: the arguments are shapes) and the rich table (the
    two texts are returned instead of drawn)."""
    args, in_tree = tree_flatten((args, kwargs))

    def f_(*args):
        args, kwargs = tree_unflatten(in_tree, args)
        return f(*args, **kwargs)

    fwd = jax.make_jaxpr(lambda *args: jax.vjp(f_, *args))(*args).jaxpr

    y, f_vjp = jax.eval_shape(lambda *args: jax.vjp(f_, *args), *args)
    res, in_tree = tree_flatten(f_vjp)

    def g_(*args):
        *res, y = args
        f_vjp = tree_unflatten(in_tree, res)
        return f_vjp(y)

    bwd = jax.make_jaxpr(g_)(*res, y).jaxpr
    return str(fwd) + str(bwd)


def seeds(fn, args, kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        jax.ad_checkpoint.print_saved_residuals(fn, *args, **kwargs)
    return print_fwd_bwd(fn, *args, **kwargs)


CLOCK = time.process_time


def timed(run, f) -> tuple[float, float]:
    """(the call alone, the call plus a full collection after it), in seconds."""
    gc.collect()  # start with the same heap, not the last side's garbage
    start = CLOCK()
    result = run(f)
    called = CLOCK()
    del result, f
    gc.collect()
    return called - start, CLOCK() - start


def in_a_new_process(side: str, opts) -> tuple[float, float]:
    """`timed` of one side, run by this script in a process of its own."""
    command = [sys.executable, __file__, "--one", side, "--target", opts.target,
               "--policy", opts.policy] + (["--wall"] if opts.wall else [])  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return tuple(json.loads(out.splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="unrolled")
    parser.add_argument("--policy", default="dots_saveable")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--fresh", action="store_true", help="each side in a new process")
    parser.add_argument("--wall", action="store_true", help="wall time, not CPU time")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # --fresh's child: one side, once
    opts = parser.parse_args()
    global CLOCK
    CLOCK = time.perf_counter if opts.wall else time.process_time
    target = loading.load_targets(os.path.join(HERE, "..", "examples", "transformer.py"))[
        opts.target
    ]
    args, kwargs = loading.resolve_arguments(target)
    spec = policies.parse(opts.policy, target.policies)
    sides = {
        "floor": lambda f: floor(f, args, kwargs),
        "seeds": lambda f: seeds(f, args, kwargs),
        "remat-tui": lambda f: ours(f, args, kwargs, target),
        "json": lambda f: ours_json(f, args, kwargs, target),
    }
    if opts.one:
        # What analyze imports on its first call is imported first: the
        # process is new, not the code.
        import remat_tui.core.trace.analysis  # noqa: F401
        import remat_tui.notebook.hooks  # noqa: F401

        print(json.dumps(timed(sides[opts.one], fresh(target.fn, spec, target.policies))))
        return
    if not opts.fresh:
        for run in sides.values():  # warm imports and JAX's own caches of jnp's functions
            run(fresh(target.fn, spec, target.policies))
    alone: dict[str, list[float]] = {k: [] for k in sides}
    collected: dict[str, list[float]] = {k: [] for k in sides}
    names = list(sides)
    for i in range(opts.repeat):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            if opts.fresh:
                call, total = in_a_new_process(name, opts)
            else:
                call, total = timed(sides[name], fresh(target.fn, spec, target.policies))
            alone[name].append(call)
            collected[name].append(total)
        print(
            f"  round {i + 1}/{opts.repeat}: "
            + ", ".join(f"{k} {alone[k][-1]:.2f}s ({collected[k][-1]:.2f}s)" for k in names),
            file=sys.stderr,
        )
    how = "a new process per side" if opts.fresh else "one process"
    clock = "wall time" if opts.wall else "CPU time"
    print(
        f"target {opts.target}, policy {spec.canonical}, median of {opts.repeat} rounds, "
        f"{how}, {clock} (JAX {jax.__version__}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs)"
    )
    print(f"  {'':10s} {'call':>8s} {'+ collect':>10s}")
    for k in names:
        print(
            f"  {k:10s} {statistics.median(alone[k]):7.3f}s {statistics.median(collected[k]):9.3f}s"
        )
    for ours_side in ("remat-tui", "json"):
        for other, bar in BARS.items():
            for label, times in (("call", alone), ("+ collect", collected)):
                ratios = [o / b for o, b in zip(times[ours_side], times[other], strict=True)]
                median = statistics.median(times[ours_side]) / statistics.median(times[other])
                print(
                    f"{ours_side:9s} / {other:5s} ({label:9s}) = {median:.3f}  "
                    f"(per round {min(ratios):.2f}-{max(ratios):.2f}"
                    + (f"; bar {bar})" if ours_side == "remat-tui" else ")")
                )


if __name__ == "__main__":
    main()
