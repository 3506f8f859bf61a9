"""`compare`, `suggest` and `fit` on a MaxText-shaped decoder sharded FSDP
over a deviceless TPU v5p slice (bench/maxtext_fsdp.py, 8 chips of
`tpu:v5p:2x2x2`), each run twice, and suggest's answer compiled by hand.

Each command runs as `remat-tui ...` in a child process (a fresh interpreter:
the wall time is what a user waits for), with the compile store
(`XDG_CACHE_HOME`) in a new empty temporary folder for the first pass and the
same folder for the second. The first pass runs the three commands in the
order a user would (compare, then suggest, then fit) over one store, so a
later command's first run reuses the earlier ones' compiles, as a user's
does; each command's `compiles:` line says how many programs it compiled and
how many the store answered.

The budget: unless `--budget` is given, halfway between the least compiled
peak per device compare found and the code as written's, rounded down to
0.25 GiB, so that the code as written does not fit and some answer does.

Then suggest's answer (its policy at the checkpoint, as its printed code
says) is written by hand with `jax.checkpoint` in the target's own
`make_loss`, lowered as `jax.jit(jax.value_and_grad(loss))` over the same
chips and shardings, compiled, and its `memory_analysis()` set beside the
figures suggest reported (argument, output, temp, alias and XLA's
`peak_memory_in_bytes`, to the byte; remat-tui's peak is HBM's live peak,
read from XLA's dump, which a hand compile's `memory_analysis` does not give).

    nice -n 10 python bench/bench_maxtext_fsdp.py [--budget 6GiB] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "maxtext_fsdp.py") + ":decoder"
DEVICE = "tpu:v5p:2x2x2"
GiB = 2**30
FIT_POLICIES = ("as_written", "dots_with_no_batch_dims_saveable")


def remat_tui(command: list[str], cache: str, out: str) -> dict:
    """`remat-tui COMMAND ... --format json -o OUT` in a child process with its
    compile store under `cache`: wall seconds, exit code, the compiles line."""
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    argv = [sys.executable, "-m", "remat_tui", *command, "--format", "json", "-o", out]
    start = time.perf_counter()
    run = subprocess.run(argv, env=env, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    compiles = re.findall(r"compiles: (.*)", run.stderr)
    if run.returncode not in (0, 1):
        tail = "\n".join(run.stderr.strip().splitlines()[-15:])
        raise SystemExit(f"remat-tui {command[0]} exited {run.returncode}:\n{tail}")
    print(f"  {command[0]}: {wall:.1f} s, exit {run.returncode}, compiles: "
          f"{compiles[-1] if compiles else '?'}", flush=True)  # fmt: skip
    return {"wall": wall, "rc": run.returncode, "compiles": compiles[-1] if compiles else "?"}


def budget_from(compare: dict) -> int:
    rows = [r for r in compare["rows"] if (r.get("compiled") or {}).get("fits")]
    written = next(r for r in compare["rows"] if _is_written(r))
    least = min(r["compiled"]["peak_bytes"] for r in rows)
    mine = written["compiled"]["peak_bytes"]
    quarter = GiB // 4
    return (least + mine) // 2 // quarter * quarter


def _is_written(row: dict) -> bool:
    return row["policy"] == "as_written" and not row["sites"] and not row.get("structure")


def label(row: dict) -> str:
    sites = "; ".join(f"site {k}: {v}" for k, v in (row.get("sites") or {}).items())
    structure = (row.get("structure") or {}).get("spec")
    return "; ".join(x for x in (f"policy {row['policy']}", sites, structure) if x)


def hand_compile(answer: dict) -> dict:
    """The answer written by hand: its checkpoint's policy in the target's own
    make_loss (under its outer policy, if any), compiled with JAX alone."""
    import jax
    from jax.experimental import topologies

    sys.path.insert(0, HERE)
    import maxtext_fsdp as m

    if answer.get("structure"):
        raise SystemExit(f"the answer is a structure ({answer['structure']}): not written here")
    policies = vars(jax.checkpoint_policies)
    (spec,) = answer["sites"].values() or ["the code as written"]
    if spec == "as_written":  # at a site: that checkpoint removed
        raise SystemExit("the answer removes the layer's checkpoint: not written here")
    written = spec == "the code as written"
    policy = m.WRITTEN if written else eval(spec, dict(policies))  # noqa: S307
    loss = m.make_loss(policy)
    if answer["policy"] != "as_written":
        loss = jax.checkpoint(loss, policy=eval(answer["policy"], dict(policies)))  # noqa: S307
    chips = list(topologies.get_topology_desc(DEVICE.partition(":")[2], platform="tpu").devices)
    start = time.perf_counter()
    compiled = jax.jit(jax.value_and_grad(loss)).lower(*m.decoder_args(chips)).compile()
    stats = compiled.memory_analysis()
    fields = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
              "alias_size_in_bytes", "peak_memory_in_bytes")  # fmt: skip
    return {"seconds": time.perf_counter() - start} | {f: getattr(stats, f, None) for f in fields}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", help="per device (default: from compare's peaks)")
    parser.add_argument("--keep", help="write the commands' JSON here (default: a temp folder)")
    options = parser.parse_args()
    work = options.keep or tempfile.mkdtemp(prefix="bench-maxtext-")
    os.makedirs(work, exist_ok=True)
    cache = tempfile.mkdtemp(prefix="store-", dir=work)
    print(f"compile store {cache} (empty), JSON in {work}; load {os.getloadavg()[0]:.1f}")
    common = ["--device", DEVICE]
    times: dict[str, list[dict]] = {}
    budget = options.budget

    def commands() -> list[tuple[str, list[str]]]:
        fit = ["fit", TARGET, "--budget", str(budget), "--multiple", "8", "--max-batch", "32"]
        fit += [a for p in FIT_POLICIES for a in ("--policy", p)]
        return [
            ("compare", ["compare", TARGET, "--compiled", *common]),
            ("suggest", ["suggest", TARGET, "--compiled", "--budget", str(budget), *common]),
            ("fit", [*fit, *common]),
        ]

    for run in (1, 2):
        print(f"run {run}:", flush=True)
        for name in ("compare", "suggest", "fit"):
            if name == "suggest" and budget is None:
                with open(os.path.join(work, "compare-1.json")) as f:
                    budget = str(budget_from(json.load(f)))
                print(f"  budget {int(budget):,} B ({int(budget) / GiB:.2f} GiB) per device")
            # Built now, not before the loop: suggest's and fit's take the budget
            # compare's first run gives.
            command = dict(commands())[name]
            out = os.path.join(work, f"{name}-{run}.json")
            times.setdefault(name, []).append(remat_tui(command, cache, out))
    print(f"load {os.getloadavg()[0]:.1f}", flush=True)

    def read(name: str, run: int) -> dict:
        with open(os.path.join(work, f"{name}-{run}.json")) as f:
            return json.load(f)

    compare, suggest, fit = read("compare", 2), read("suggest", 2), read("fit", 2)
    assert read("suggest", 1)["best"]["sites"] == suggest["best"]["sites"]
    best = suggest["best"]
    hand = hand_compile(best)
    reported = best["compiled"]
    print(f"\nhand compile of the answer: {hand['seconds']:.1f} s")
    pairs = [("argument_bytes", "argument_size_in_bytes"), ("output_bytes", "output_size_in_bytes"),
             ("temp_bytes", "temp_size_in_bytes"), ("alias_bytes", "alias_size_in_bytes"),
             ("backend_peak_bytes", "peak_memory_in_bytes")]  # fmt: skip
    for ours, theirs in pairs:
        same = "same" if reported.get(ours) == hand[theirs] else "DIFFERENT"
        print(f"  {ours:20} reported {reported.get(ours)!s:>15}  hand {hand[theirs]!s:>15}  {same}")
    hand_sum = sum(hand[f] or 0 for _, f in pairs[:3]) - (hand["alias_size_in_bytes"] or 0)

    written = next(r for r in compare["rows"] if _is_written(r))
    peaks = {
        "compare": f"as written {written['compiled']['peak_bytes']:,}",
        "suggest": f"{reported['peak_bytes']:,}",
        "fit": "; ".join(
            f"{r['policy']} batch {r['batch']} {r.get('peak_bytes') or 0:,}" for r in fit["rows"]
        ),
    }
    answers = {
        "compare": f"{len(compare['rows'])} rows, "
        f"{sum(1 for r in compare['rows'] if r.get('pareto'))} Pareto",
        "suggest": label(best),
        "fit": "best " + label(fit["rows"][0]) + f" batch {fit['rows'][0]['batch']}",
    }
    print(f"\nbudget {int(budget):,} B per device, {DEVICE}")
    print("| command | first run s | second run s | ratio | compiles (first / second) "
          "| answer | reported peak per device (B) | hand peak (B) |")  # fmt: skip
    print("|---|---:|---:|---:|---|---|---:|---:|")
    for name, (one, two) in times.items():
        hand_cell = (f"{hand_sum:,} (sum; XLA's peak {hand['peak_memory_in_bytes']:,})"
                     if name == "suggest" else "")  # fmt: skip
        print(f"| {name} | {one['wall']:.1f} | {two['wall']:.1f} | {two['wall'] / one['wall']:.3f} "
              f"| {one['compiles']} / {two['compiles']} | {answers[name]} | {peaks[name]} "
              f"| {hand_cell} |")  # fmt: skip
    summed = sum(reported[k] for k in ("argument_bytes", "output_bytes", "temp_bytes"))
    summed -= reported["alias_bytes"]
    print(f"\nsuggest's reported sum (argument + output + temp - alias): {summed:,}; "
          f"its peak ({reported.get('peak_source')}): {reported['peak_bytes']:,}")  # fmt: skip


if __name__ == "__main__":
    main()
