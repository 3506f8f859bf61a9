"""The commands the pages show that take too long for the test suite
(tests/unit/doc_commands.py's LEFT_TO_BENCH: a fit of the MLP on the CPU,
17-61 s on 2 shared cores; fits of the GPT compiled for a deviceless TPU, twenty
minutes or more each), run as written, one after another, each in a process
of its own as a user runs it: its exit status (0, as the pages say), its
time and its last lines. The tests check that every other command a page
shows runs, there or in the test named for it.

    python bench/bench_doc_commands.py [--only SUBSTRING] [--timeout SECONDS]

The compile store is the user's, as for any command; the TPU fits need the
tpu extra.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "unit"))

from doc_commands import LEFT_TO_BENCH, argv  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="", help="run the commands containing this")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per command")
    o = p.parse_args()
    failed = 0
    for command in sorted(c for c in LEFT_TO_BENCH if o.only in c):
        began = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-m", "remat_tui", *argv(command)], cwd=ROOT,
                                  capture_output=True, text=True, timeout=o.timeout)  # fmt: skip
            status, out = done.returncode, (done.stdout + done.stderr).strip()
        except subprocess.TimeoutExpired:
            status, out = "timed out", ""
        took = time.perf_counter() - began
        failed += status != 0
        print(f"{shlex.join(['remat-tui', *argv(command)])}: exit {status}, {took:.1f} s")
        for line in out.splitlines()[-4:]:
            print(f"    {line}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
