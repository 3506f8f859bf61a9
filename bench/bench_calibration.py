"""How good is the step-time estimate? For each program and configuration,
the roofline estimate (core/xla/estimates/step_time.py, from `compare(...,
compiled=True)`) beside the real step on the local device: the same function
under the same policy as a user writes it, `jax.jit(jax.value_and_grad(
jax.checkpoint(f, policy=...)))` (for a non-scalar output, the output beside
its vjp of ones), compiled by JAX and run on arrays of the example's shapes.
The runs of a program's configurations are interleaved, round after round,
and each keeps its fastest: on a shared machine, drift then touches every
configuration alike.

Printed per program: each configuration's estimate, measured minimum and
their ratio; then over all programs:
- the median estimate/measured ratio, and its spread (max / min);
- the pairs ordered right: of the pairs of configurations of one program
  whose measured times differ by more than 15%, how many the estimate alone
  puts in the same order;
- the rank agreement: Kendall's tau between estimate and measurement over
  every pair of configurations of one program.

Two sets of programs:
- `examples`: remat-tui's built-in examples (examples/*.py), as a user first
  meets them. Several take under a millisecond a step, where the CPU's fixed
  costs (dispatch, one pass over each fusion) dominate and a roofline of the
  work alone undershoots.
- `held-out` (default): programs written for this check and not used to shape
  the model: MLPs, elementwise chains, attention, a transformer block and a
  scanned stack.

    python bench/bench_calibration.py [--programs held-out|examples|all] [--runs 7]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import remat_tui
from remat_tui.core.setup import policies
from remat_tui.core.setup.loading import resolve_arguments
from remat_tui.core.xla.estimates import chips

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")
POLICIES = [
    "as_written",
    "nothing_saveable",
    "dots_saveable",
    "everything_saveable",
    "dots_with_no_batch_dims_saveable",
]
APART = 1.15  # pairs whose measured times differ by more than this are judged


def f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


# --- held-out programs -----------------------------------------------------------


def relu_mlp(ws, x):
    for w in ws:
        x = jax.nn.relu(x @ w)
    return jnp.mean(x**2)


def swiglu(ws, x):
    for w_gate, w_up, w_down in ws:
        x = x + (jax.nn.silu(x @ w_gate) * (x @ w_up)) @ w_down
    return jnp.mean(x**2)


def norm_chain(x):
    for _ in range(6):
        x = jax.nn.standardize(x, axis=-1)
        x = jnp.log1p(jnp.exp(x)) * jnp.tanh(x)
    return jnp.mean(x**2)


def cosine_chain(x):
    for _ in range(5):
        x = jnp.cos(x) * jnp.exp(-x * x)
    return jnp.sum(x)


def causal_attention(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
    mask = jnp.tril(jnp.ones((s.shape[-1], s.shape[-1]), bool))
    p = jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1)
    return jnp.mean(jnp.einsum("bhqk,bhkd->bhqd", p, v) ** 2)


def block(params, x):
    wq, wk, wv, wo, w1, w2 = params
    b, t, d = x.shape
    h = jax.nn.standardize(x, axis=-1)
    q, k, v = ((h @ w).reshape(b, t, 4, d // 4) for w in (wq, wk, wv))
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(d / 4)
    a = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v).reshape(b, t, d)
    x = x + a @ wo
    return x + jax.nn.gelu(jax.nn.standardize(x, axis=-1) @ w1) @ w2


def two_blocks(params, x):
    for p in params:
        x = block(p, x)
    return jnp.mean(x**2)


def scanned_tanh(ws, x):
    return jnp.mean(jax.lax.scan(lambda x, w: (jnp.tanh(x @ w), None), x, ws)[0] ** 2)


def block_params(d):
    return (f32(d, d), f32(d, d), f32(d, d), f32(d, d), f32(d, 4 * d), f32(4 * d, d))


HELD_OUT = {
    "relu mlp 3x2048": (relu_mlp, ([f32(2048, 2048)] * 3, f32(256, 2048))),
    "swiglu 2x512": (swiglu, ([(f32(512, 1024), f32(512, 1024), f32(1024, 512))] * 2,
                              f32(1024, 512))),
    "norm chain": (norm_chain, (f32(1024, 1024),)),
    "cosine chain": (cosine_chain, (f32(1024, 1024),)),
    "causal attention": (causal_attention, (f32(2, 4, 512, 64),) * 3),
    "2 transformer blocks": (two_blocks, ([block_params(256)] * 2, f32(8, 256, 256))),
    "scanned tanh 12x512": (scanned_tanh, (f32(12, 512, 512), f32(512, 512))),
}  # fmt: skip


def held_out():
    for name, (fn, args) in HELD_OUT.items():
        yield name, remat_tui.Target(fn=fn, name=name, args=args)


def examples():
    for file, names in (
        ("mlp.py", ["loss"]),
        ("notebook.py", ["f4", "loss"]),
        ("transformer.py", ["scanned", "scanned_checkpointed"]),
    ):
        targets = remat_tui.load_targets(os.path.join(EXAMPLES, file))
        for name in names:
            yield f"{file}:{name}", targets[name]


# --- the figures ---------------------------------------------------------------------


def measure(label, target, runs: int) -> list[tuple[str, float, float]]:
    """(policy, estimated seconds, measured seconds) per configuration."""
    c = remat_tui.compare(target, policies=POLICIES, compiled=True)
    estimates = {r.config.policy: r.time["seconds"] for r in c.rows if r.time}
    steps = {policy: by_hand(target, policy) for policy in estimates}
    best = dict.fromkeys(steps, float("inf"))
    for _ in range(runs + 1):  # the first round warms up, and is kept only if faster
        for policy, run in steps.items():
            start = time.perf_counter()
            run()
            best[policy] = min(best[policy], time.perf_counter() - start)
    return [(policy, estimates[policy], best[policy]) for policy in steps]


def by_hand(target, policy: str):
    """The step as a user writes it, compiled, with its arrays: a callable
    that runs it once, to the end."""
    args, kwargs = resolve_arguments(target)
    fn = target.fn
    if policy != "as_written":
        fn = jax.checkpoint(fn, policy=policies.build(policies.parse(policy)))
    rng = np.random.default_rng(0)

    def real(x):
        if isinstance(x, jax.ShapeDtypeStruct):
            return jnp.asarray(0.1 * rng.standard_normal(x.shape, dtype=np.float32), x.dtype)
        return x

    args, kwargs = jax.tree.map(real, (args, kwargs))

    def value_and_grad(a, k):
        """jax.value_and_grad, for a scalar output; else the output beside its
        vjp of ones (as remat-tui compiles a non-scalar function's step)."""
        out, vjp = jax.vjp(lambda a: fn(*a, **k), a)
        return out, vjp(jnp.ones_like(out))

    step = jax.jit(value_and_grad)
    executable = step.lower(args, kwargs).compile()
    return lambda: jax.block_until_ready(executable(args, kwargs))


def pairs(results):
    """(judged, ordered right, concordant, all): pairs of one program's rows."""
    judged = right = concordant = total = 0
    for (_, e1, m1), (_, e2, m2) in itertools.combinations(results, 2):
        total += 1
        same = (e1 - e2) * (m1 - m2) > 0
        concordant += same
        if max(m1, m2) > APART * min(m1, m2):
            judged += 1
            right += same
    return judged, right, concordant, total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", choices=("held-out", "examples", "all"), default="held-out")
    parser.add_argument("--runs", type=int, default=7)
    opts = parser.parse_args()
    sets = {"held-out": [held_out], "examples": [examples], "all": [held_out, examples]}
    cpu = chips.measured_cpu() if jax.default_backend() == "cpu" else None
    if cpu is not None:
        print(
            f"cpu: {cpu.peak_flops / 1e9:.0f} GFLOP/s, {cpu.memory_bandwidth / 1e9:.0f} GB/s, "
            f"{cpu.transcendentals_per_second / 1e9:.2f} G transcendentals/s (measured)"
        )
    ratios, judged, right, concordant, total = [], 0, 0, 0, 0
    for make in sets[opts.programs]:
        for label, target in make():
            results = measure(label, target, opts.runs)
            print(f"\n{label}")
            for policy, estimate, measured in results:
                ratio = estimate / measured
                ratios.append(ratio)
                print(f"  {policy:34s} est {estimate * 1e3:9.3f} ms  measured "
                      f"{measured * 1e3:9.3f} ms  ratio {ratio:5.2f}")  # fmt: skip
            j, r, c, t = pairs(results)
            judged, right, concordant, total = judged + j, right + r, concordant + c, total + t
            print(f"  pairs apart by >15%: {r}/{j} ordered right")
    print(f"\nconfigurations: {len(ratios)}")
    low, high = min(ratios), max(ratios)
    print(f"median estimate/measured: {statistics.median(ratios):.2f} "
          f"(from {low:.2f} to {high:.2f}, spread {high / low:.1f}x)")  # fmt: skip
    if judged:
        print(f"pairs apart by >15% ordered right: {right}/{judged} ({right / judged:.0%})")
    if total:
        tau = (2 * concordant - total) / total
        print(f"rank agreement (Kendall's tau, every pair of one program): {tau:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
