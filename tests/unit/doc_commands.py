"""The `remat-tui` commands the pages show, and where each is run: the
helper of tests/unit/test_docs_claims.py and bench/bench_doc_commands.py.

A page shows a command in a ```sh block, one a line (a line ending in `\\`
goes on). What runs each: `RUN_HERE`, the tests run it as written (the
status it exits with); `RUN_ELSEWHERE`, a test that runs it, or one like it,
named `path::test`; `LEFT_TO_BENCH`, too long for the suite (a fit of a GPT
compiled for a TPU takes twenty minutes), run by bench/bench_doc_commands.py;
`SHAPES_ONLY`, a placeholder (`model.py`, `target.py`) or a synopsis, which
the tests parse and do not run. Every command a page shows is in exactly one.
"""

from __future__ import annotations

import os
import re
import shlex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pages() -> list[str]:
    """The pages a user reads: README.md, docs/**/*.md and bench/README.md."""
    found = ["README.md", "bench/README.md"]
    for folder, _, files in os.walk(os.path.join(ROOT, "docs")):
        found += [
            os.path.relpath(os.path.join(folder, f), ROOT) for f in files if f.endswith(".md")
        ]
    return sorted(found)


def read(page: str) -> str:
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        return f.read()


def shown_commands() -> list[tuple[str, int, str]]:
    """(page, line, command) for every `remat-tui` command a ```sh block shows,
    its comment and any environment settings before it left out; a command
    run by another (`ray job submit ... -- remat-tui ...`) from its
    `remat-tui` on."""
    found = []
    for page in pages():
        text = read(page)
        for block in re.finditer(r"```sh\n(.*?)```", text, flags=re.S):
            first = text[: block.start(1)].count("\n") + 1
            joined = block[1].replace("\\\n", " ")
            lines = block[1].split("\n")
            for i, line in enumerate(joined.split("\n")):
                line = re.sub(r"\s+#.*$", "", line).strip()
                at = line.find("remat-tui ")
                if at < 0 or (at > 0 and not re.search(r"(^|\s)(--\s|\w+=\S+\s)$", line[:at])):
                    continue
                where = first + sum(1 + lines[j].count("\\\n") for j in range(i))
                found.append((page, where, " ".join(line[at:].split())))
    return found


def argv(command: str) -> list[str]:
    """The command's arguments after `remat-tui`, as the shell splits them."""
    return shlex.split(command)[1:]


# Run as written by tests/unit/test_docs_claims.py, in this order, on CPU
# unless it names a TPU (those where the tpu extra is installed): the status
# each exits with. A page's placeholder is run as the example `STANDS_FOR`
# says: `FILE` for a target with a scan of 24 layers, `model.py:loss` for a
# model of yours.
STANDS_FOR = {"FILE": "examples/transformer.py:scanned_checkpointed",
              "model.py:loss": "examples/mlp.py:loss"}  # fmt: skip
RUN_HERE = {
    "remat-tui report examples/mlp.py --policy nothing_saveable --format md": 0,
    "remat-tui suggest examples/transformer.py:scanned_checkpointed --budget 300MiB": 0,
    "remat-tui report examples/notebook.py:f4 --policy nothing_saveable --format md -o f4.md": 0,
    "remat-tui report examples/transformer.py:scanned_checkpointed"
    " --site block=nothing_saveable": 0,
    "remat-tui report examples/mlp.py --compiled": 0,
    "remat-tui report tests/models/stateful_noise.py --policy nothing_saveable": 0,
    "remat-tui memory examples/mlp.py --policy nothing_saveable": 0,
    "remat-tui compare examples/transformer.py:scanned_checkpointed": 0,
    "remat-tui diff examples/notebook.py:f4 --policy nothing_saveable --vs dots_saveable": 0,
    "remat-tui report examples/transformer.py:scanned_checkpointed -o report.json": 0,
    "remat-tui report FILE --structure 'nested(4)'": 0,
    "remat-tui report FILE --structure 'split(8, everything_saveable, as_written)'": 0,
    "remat-tui memory FILE --structure 'nested(4)'": 0,
    "remat-tui verify examples/mlp.py --policy nothing_saveable": 0,
    "remat-tui cache": 0,
    "remat-tui cache clear": 0,
    # deviceless TPU compiles (the tpu extra)
    "remat-tui report examples/transformer.py:scanned_checkpointed --site block=nothing_saveable"
    " --device tpu:v5e:2x2 --compiled --max-peak-bytes 12GiB --max-residual-bytes 2GiB": 0,
    "remat-tui report examples/transformer.py:scanned_checkpointed"
    " --device tpu:v5e:2x2 --compiled": 0,
    "remat-tui memory examples/wide_layers.py --device tpu:v5e:2x2 --memory-limit 36MiB": 0,
    "remat-tui check model.py:loss --device tpu:v5e:2x2 --write baseline.json": 0,
    "remat-tui check model.py:loss --against baseline.json": 0,
}

# Run by another test, as written or with what differs said.
RUN_ELSEWHERE = {
    "remat-tui examples/mlp.py": "tests/app/test_app.py::test_switch_policies_by_key",
    "remat-tui report examples/mlp.py --device cpu:1": (
        "tests/unit/test_docs.py::test_every_second_cpu_device_comes_with_the_flag_that_makes_it"
    ),
    "remat-tui compare examples/mlp.py --measure --runs 7": (
        "tests/unit/test_measure.py::test_compare_measure_prints_both_times_and_ranks_by_the_measured"
    ),  # --runs 2 there
    "remat-tui FILE[:NAME] --web [--port N]": (
        "tests/cli/test_web.py::test_web_serves_the_app_on_localhost"
    ),
    "remat-tui examples/transformer.py:scanned_checkpointed --device tpu:v5e:2x2": (
        "tests/app/test_app_tpu.py::test_d_offers_the_topologies_and_p_compiles_for_the_chip"
    ),  # examples/mlp.py there: d picks the topology, then p
    "remat-tui suggest model.py --budget 16GiB --compiled --no-cache": (
        "tests/cli/test_cli_docs.py::test_every_command_that_compiles_takes_no_cache"
    ),
    "remat-tui suggest model.py:loss --budget 40GiB --compiled --device tpu:v5p:2x2x2"
    " --cluster ray --format json": (
        "tests/unit/test_ray_compiles.py::test_compare_on_ray_gives_the_rows_of_compiling_here"
    ),
    "remat-tui verify tests/models/stateful_noise.py --policy nothing_saveable": (
        "tests/cli/test_verify_cli.py::test_recomputing_the_callback_exits_1_naming_the_leaves"
    ),
    'remat-tui verify tests/models/linen_stack.py --structure "nested(4)"': (
        "tests/unit/test_verify_structures.py::"
        "test_verify_of_a_structure_on_a_linen_model_exits_0_and_says_it_converted"
    ),
    'remat-tui verify tests/models/eight_names.py --policy "save_only_these_names()"': (
        "tests/unit/test_verify_bisect.py::test_the_command_names_the_culprit_in_one_line"
    ),
    'remat-tui verify tests/models/eight_names_site.py --site "block=save_only_these_names()"': (
        "tests/unit/test_verify_bisect_sites.py::test_the_command_names_the_one_name_at_the_site"
    ),
    "remat-tui report examples/mlp.py --policy dots_saveable --measure --verify": (
        "tests/unit/test_verify_shared.py::"
        "test_report_measure_verify_compiles_and_runs_the_configuration_once"
    ),
    "remat-tui report tests/models/stateful_noise.py --policy nothing_saveable --verify": (
        "tests/cli/test_verify_everywhere.py::test_report_verify_says_the_verdict_in_json_and_one_line"
    ),
    "remat-tui compare tests/models/stateful_noise.py --verify": (
        "tests/cli/test_verify_everywhere.py::"
        "test_compare_verify_marks_recomputing_the_callback_and_never_stars_it"
    ),
}

# Run by bench/bench_doc_commands.py: minutes each.
LEFT_TO_BENCH = {
    "remat-tui fit examples/mlp.py --budget 1MiB",  # 17-61 s on 2 shared cores
    "remat-tui fit bench/gpt_v5e.py:gpt --budget 16GiB --device tpu:v5e:2x2 --multiple 8",
    "remat-tui fit bench/gpt_v5e.py:gpt --budget 16GiB --device tpu:v5e:2x2 --multiple 8"
    " --optimize",
}

# A placeholder file or a synopsis: parsed, not run.
SHAPES_ONLY = {
    "remat-tui FILE[:NAME] [--policy SPEC] [--site ID|FUNCTION=SPEC] [--device D]"
    " [--mesh AXIS=N,...]",
    "remat-tui target.py",
    "remat-tui target.py:f",
}
