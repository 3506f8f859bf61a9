"""What the pages say of commands, options, exit statuses and figures, run
(issue 41: every such claim in the docs and bench/README is run by a test or
by bench/, and is true). docs/guide/cli.md's own sentences are
tests/cli/test_cli_docs.py's; here:

- every `remat-tui` command a page shows parses as the command line takes
  it, and is run: here as written (tests/unit/doc_commands.py's `RUN_HERE`,
  the examples on CPU, and deviceless TPU compiles where the tpu extra is
  installed), or by the test or bench script named for it;
- every option a page names is one of remat-tui's, or of the tool or bench
  script the page names it with;
- the figures that are the code's own constants are the code's, and those
  measured on an example are what a run gives now.

The commands run in this process (remat_tui.cli.main), in a folder of the
test's own, with the compile store in a folder of its own too."""

import importlib.util
import os
import re
import shlex

import pytest
from doc_commands import (
    LEFT_TO_BENCH,
    ROOT,
    RUN_ELSEWHERE,
    RUN_HERE,
    SHAPES_ONLY,
    STANDS_FOR,
    argv,
    pages,
    read,
    shown_commands,
)

from remat_tui import cli
from remat_tui.cli.app import parser as app_parser
from remat_tui.cli.commands import SUBCOMMANDS
from remat_tui.cli.commands import parser as headless_parser
from remat_tui.cli.commands.cache import parser as cache_parser

HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
needs_tpu = pytest.mark.skipif(not HAS_LIBTPU, reason="needs the tpu extra (libtpu)")


def parser_for(args: list[str]):
    if args and args[0] == "cache":
        return cache_parser(), args[1:]
    if args and args[0] in SUBCOMMANDS:
        return headless_parser(), args
    return app_parser(), args


def all_options() -> set[str]:
    """Every option of remat-tui's parsers: the app's, each command's, cache's."""
    found = set()
    headless = headless_parser()
    subs = next(a for a in headless._actions if a.dest == "command").choices.values()
    for parser in (app_parser(), cache_parser(), *subs):
        found |= {o for a in parser._actions for o in a.option_strings}
    return found


def test_every_command_shown_is_run_somewhere():
    shown = {command for _, _, command in shown_commands()}
    places = [set(RUN_HERE), set(RUN_ELSEWHERE), LEFT_TO_BENCH, SHAPES_ONLY]
    assert shown == set().union(*places), "a page shows a command no test or bench runs"
    assert sum(len(p) for p in places) == len(shown), "a command is in two places"
    for command, where in RUN_ELSEWHERE.items():
        path, _, test = where.partition("::")
        assert re.search(rf"^(async )?def {test}\(", read(path), re.M), (command, where)
    bench = read("bench/bench_doc_commands.py")
    assert "LEFT_TO_BENCH" in bench


def test_every_command_shown_parses():
    for page, line, command in shown_commands():
        args = argv(command)
        if "FILE[:NAME]" in args:  # a synopsis: its options are the app's
            options = set(re.findall(r"--[a-z][a-z-]*", command))
            assert options <= {o for a in app_parser()._actions for o in a.option_strings}, (
                page, line, command)  # fmt: skip
            continue
        parser, rest = parser_for(args)
        try:
            parser.parse_args(rest)
        except SystemExit as stop:
            pytest.fail(f"{page}:{line}: {command} does not parse (exit {stop.code})")


def on_tpu(command: str) -> bool:
    """A deviceless TPU compile, or check's second half of one."""
    return "tpu:" in command or command.startswith("remat-tui check")


VALUED = {"--memory-limit", "--budget", "--max-peak-bytes", "--max-residual-bytes"}


def test_every_command_named_in_a_sentence_parses():
    """`remat-tui report FILE[:NAME] --format json` in a sentence: as a
    command line, its placeholders filled, each parses."""
    fill = {"FILE[:NAME]": "f.py", "FILE": "f.py", "SIZE": "1GiB"}
    for page in pages():
        for command in re.findall(r"`(remat-tui [^`]*)`", read(page)):
            args = [fill.get(a, a) for a in argv(" ".join(command.split()))]
            if not args or any(w in args for w in ("COMMAND", "...")):
                continue  # `remat-tui COMMAND --help`, `compare|suggest|diff ...`: a pattern
            if args[0] in SUBCOMMANDS and len(args) == 1:
                continue  # the command's name: `remat-tui check`
            if args[0] in SUBCOMMANDS and not any(".py" in a for a in args):
                args.insert(1, "f.py")  # `remat-tui report --compiled`: an option of it
            if args[-1] in VALUED:
                args.append("1GiB")  # `remat-tui memory --memory-limit`: the option named
            parser, rest = parser_for(args)
            try:
                parser.parse_args(rest)
            except SystemExit as stop:
                if stop.code != 0:  # --help exits 0
                    pytest.fail(f"{page}: {command} does not parse (exit {stop.code})")


def run_shown(commands: list[str], tmp_path, monkeypatch, capsys) -> dict[str, tuple]:
    """Each command as the page shows it, its placeholders standing for the
    examples STANDS_FOR names, in a folder of its own: (status, out, err)."""
    monkeypatch.chdir(tmp_path)
    said = {}
    for command in commands:
        args = [STANDS_FOR.get(a, a) for a in argv(command)]
        args = [
            os.path.join(ROOT, a) if a.startswith(("examples/", "bench/", "tests/models/")) else a
            for a in args
        ]
        status = cli.main(args)
        out, err = capsys.readouterr()
        assert status == RUN_HERE[command], (command, status, err[-2000:])
        assert "Traceback" not in err, (command, err[-2000:])
        said[command] = (status, out, err)
    return said


def test_the_commands_shown_run_as_the_pages_say(tmp_path, monkeypatch, capsys, store_on):
    on_cpu = [c for c in RUN_HERE if not on_tpu(c)]
    said = run_shown(on_cpu, tmp_path, monkeypatch, capsys)
    for command, (_, out, _) in said.items():
        if "-o " in command:
            written = tmp_path / shlex.split(command)[-1]
            assert written.stat().st_size > 0 and out == "", command
    # `cache`: where it is, how many programs, how big; `cache clear` empties it.
    shown = said["remat-tui cache"][1]
    assert str(store_on / "remat-tui" / "compiles") in shown
    held = re.search(r"(\d+) programs?, [\d.]+ \w*B of 256.0 MiB", shown)
    assert held and int(held[1]) >= 1, shown
    assert "cleared the compile cache" in "".join(said["remat-tui cache clear"][1:])
    assert not os.listdir(store_on / "remat-tui" / "compiles")


@needs_tpu
def test_the_tpu_commands_shown_run_as_the_pages_say(tmp_path, monkeypatch, capsys):
    """Deviceless v5e compiles: the gate passes under its budgets, check
    finds its own baseline unchanged, and XLA's rematerialization pass does
    under the memory limit what docs/guide/story.md says it does."""
    tpu = [c for c in RUN_HERE if on_tpu(c)]
    said = run_shown(tpu, tmp_path, monkeypatch, capsys)
    assert (
        said["remat-tui check model.py:loss --against baseline.json"][1]
        .rstrip()
        .endswith("unchanged")
    )
    limit = next(c for c in tpu if "--memory-limit" in c)
    out = " ".join(said[limit][1].split())
    story = " ".join(read("docs/guide/story.md").split())
    figures = re.search(
        r"it recomputes (\d+) values .*?the peak goes from ([\d.]+ MiB) to ([\d.]+ MiB), within "
        r"the limit, XLA's FLOPs (\+[\d.]+%) and the estimated step time (\+[\d.]+%) "
        r"\(JAX ([\d.]+) and its libtpu",
        story,
    )
    assert figures, "story.md no longer gives the pass's figures"
    count, before, after, flops, seconds, version = figures.groups()
    assert "XLA's rematerialization pass acted under xla_tpu_max_hbm_size_mib=36" in out
    assert f"it recomputes {count} values" in out
    import jax

    if jax.__version__ == version:  # figures of the JAX and libtpu the page names
        assert (
            f"peak {before} -> {after}; XLA's FLOPs {flops}; estimated step time {seconds}" in out
        )


# Options a page names with another tool (ray's job submit, Jupyter's kernel
# install, nbconvert) or with a bench script, not with remat-tui.
OTHER_TOOLS = {"--address", "--working-dir", "--runtime-env-json", "--user", "--name", "--execute"}


def bench_scripts_named(text: str) -> list[tuple[str, str]]:
    """(script, what follows it in its backticks) for each bench script a page
    names in a command."""
    found = []
    for span in re.findall(r"`([^`]*bench[/_][^`]*\.py[^`]*)`", text):
        for script, rest in re.findall(r"(bench_\w+)\.py([^`]*)", span):
            found.append((script, rest))
    return found


def test_every_option_a_page_names_is_one_of_remat_tuis_or_its_tools():
    ours = all_options()
    for page in pages():
        text = read(page)
        with_scripts = {}
        for script, rest in bench_scripts_named(text):
            source = read(f"bench/{script}.py")
            for option in re.findall(r"--[a-z][a-z0-9-]*", rest):
                assert f'"{option}"' in source, (page, script, option)
                with_scripts[option] = script
        if page == "bench/README.md":
            continue  # its options are its scripts', checked above
        prose = re.sub(r"`[^`]*bench[/_][^`]*\.py[^`]*`", "", text)
        for option in set(re.findall(r"(?<![\w-])--[a-z][a-z0-9_-]*", prose)):
            if option.startswith("--xla_"):  # an XLA flag, in XLA_FLAGS
                continue
            assert option in ours or option in OTHER_TOOLS, (page, option)


def test_every_bench_script_is_in_the_benchmarks_page_and_every_one_it_names_exists():
    page = read("bench/README.md")
    named = {script for script, _ in bench_scripts_named(page)}
    scripts = {f[:-3] for f in os.listdir(os.path.join(ROOT, "bench")) if f.startswith("bench_")}
    assert named <= scripts, named - scripts
    assert scripts <= named, f"bench/README.md does not say what {scripts - named} measure"


def code_constants():
    """(page, the sentence's words around the figure, the figure, the code's value)."""
    from remat_tui import web
    from remat_tui.app.controllers import analyses
    from remat_tui.app.screens import fit as fit_screen
    from remat_tui.core.jaxcompat import version
    from remat_tui.core.search import check
    from remat_tui.core.search.exact import search as exact
    from remat_tui.core.search.exact import space as exact_space
    from remat_tui.core.search.notes import unchanged as notes
    from remat_tui.core.search.suggest import candidates as suggest_candidates
    from remat_tui.core.setup import config
    from remat_tui.core.trace import primal
    from remat_tui.core.trace import rebuilt_scans as structures
    from remat_tui.core.xla.buffers import peak_notes
    from remat_tui.core.xla.compile import store as program_store
    from remat_tui.core.xla.estimates import cpu_rates, flop_note, step_time
    from remat_tui.core.xla.run import measure
    from remat_tui.core.xla.run import pool as compile_pool
    from remat_tui.notebook import analysis_html, live

    pct = lambda x: f"{x:.0%}"  # noqa: E731
    dotted = lambda v: ".".join(map(str, v))  # noqa: E731
    return [
        (
            "docs/guide/jax-versions.md",
            r"outside the tested range \(([\d.]+) to",
            dotted(version.OLDEST_TESTED),
        ),
        (
            "docs/guide/jax-versions.md",
            r"to ([\d.]+)\.x\) remat-tui still runs",
            dotted(version.NEWEST_TESTED),
        ),
        ("pyproject.toml", r'"jax>=([\d.]+)"', dotted(version.OLDEST_TESTED)),
        (
            "docs/guide/notebook.md",
            r"at most ([\d,]+) lines each",
            f"{analysis_html.MAX_PANE_LINES:,}",
        ),
        ("docs/guide/notebook.md", r"seen before \(up to (\d+)\)", live.LIMIT),
        ("docs/guide/app.md", r"Keys closer together than ([\d.]+) s", analyses.BURST_SECONDS),
        ("docs/guide/app.md", r"The app keeps the (\d+) analyses", analyses.LIMIT),
        ("docs/guide/app.md", r"the core the last (\d+) primal programs", primal.CACHE_SIZE),
        (
            "docs/guide/app.md",
            r"spares less than (\d+%) of the recompute",
            pct(notes.SPARES_LITTLE),
        ),
        ("docs/guide/app.md", r"http://localhost:(\d+)/", web.DEFAULT_PORT),
        (
            "docs/guide/screens.md",
            r"a line per\s+configuration \(the best (eight)\)",
            {8: "eight"}[fit_screen.LINES],
        ),
        ("docs/guide/search.md", r"at least\s+(\d+) layers, its", structures.MIN_LENGTH),
        ("docs/guide/search.md", r"estimate can tell \((\d+%)", pct(step_time.RESOLUTION)),
        (
            "docs/guide/search.md",
            r"Up to (\d+)\s+configurations it analyses every one",
            suggest_candidates.ENUMERATE_LIMIT,
        ),
        (
            "docs/guide/search.md",
            r"beyond (\d+) such decisions",
            exact_space.POLICY_DECISIONS_AT_MOST,
        ),
        (
            "docs/how-it-decides.md",
            r"out of rounds \((\d+)\s+per decision",
            exact.ROUNDS_PER_DECISION,
        ),
        ("docs/how-it-decides.md", r"per decision, at least (\d+)\)", exact.ROUNDS_AT_LEAST),
        ("docs/how-it-decides.md", r"for a scan of\s+N ≥ (\d+) layers", structures.MIN_LENGTH),
        (
            "docs/guide/compiles.md",
            r"It holds at most (\d+) MiB",
            program_store.DEFAULT_LIMIT // 2**20,
        ),
        ("docs/guide/compiles.md", r"one per (two) cores", {2: "two"}[compile_pool.CORES_PER_JOB]),
        (
            "docs/guide/compiles.md",
            r"per (\d+) GiB of available memory",
            compile_pool.MEMORY_PER_JOB // 2**30,
        ),
        (
            "docs/guide/compiles.md",
            r"has taken (\d+) s or more",
            int(compile_pool.WORKER_WORTH_SECONDS),
        ),
        (
            "docs/guide/compiles.md",
            r"is run again \((three) times\)",
            {3: "three"}[compile_pool.MAX_RETRIES],
        ),
        (
            "docs/guide/compiled.md",
            r"residual bytes by more than (\d+%)",
            pct(peak_notes.RESIDUALS_MOVED),
        ),
        ("docs/guide/compiled.md", r"\(its FLOPs within (\d+%)\)", pct(peak_notes.SAME_WORK)),
        (
            "docs/guide/story.md",
            r"`--tolerance` \(default\s+`(\d+%)`\)",
            pct(check.DEFAULT_TOLERANCE),
        ),
        ("docs/guide/measure.md", r"update of a (\d+) MiB", cpu_rates.COPY_BYTES // 2**20),
        ("docs/guide/measure.md", r"its fastest run\s+in (\d+) rounds", cpu_rates.ROUNDS),
        (
            "docs/guide/measure.md",
            r"differ by more than (\d+%) on a program without loops",
            pct(flop_note.TOLERANCE),
        ),
        ("docs/guide/measure.md", r"timed runs \(default (\d+)\)", config.RUNS),
        ("docs/guide/measure.md", r"standard deviation ([\d.]+)", measure.FILL_STD),
        ("docs/how-it-decides.md", r"the fastest of (\d+) interleaved rounds", cpu_rates.ROUNDS),
    ]


def test_the_examples_are_the_sizes_the_pages_give():
    """targets.md's transformer (24 blocks, d_model 512, sequence 128) and
    story.md's wide layers (eight layers of 16 MiB activations)."""
    import importlib.util as util

    def example(name):
        spec = util.spec_from_file_location(name, os.path.join(ROOT, "examples", f"{name}.py"))
        module = util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    t = example("transformer")
    said = re.search(r"`examples/transformer.py`: (\d+) decoder blocks, d_model (\d+), sequence "
                     r"(\d+),", " ".join(read("docs/guide/targets.md").split()))  # fmt: skip
    assert said.groups() == (str(t.LAYERS), str(t.D_MODEL), str(t.SEQ))
    w = example("wide_layers")
    said = re.search(r"\(eight `tanh\(x @ w\)` layers of (\d+) MiB activations",
                     " ".join(read("docs/guide/story.md").split()))  # fmt: skip
    assert w.LAYERS == 8 and said[1] == str(w.ROWS * w.WIDTH * 4 // 2**20)


def test_the_figures_that_are_the_codes_own_constants():
    for page, words, value in code_constants():
        found = re.search(words, read(page))
        assert found, (page, words)
        assert found[1] == str(value), (page, found[0], value)


def test_the_chips_the_estimate_knows_are_the_pages():
    from remat_tui.core.xla.estimates import chips

    page = " ".join(read("docs/guide/measure.md").split())
    said = re.search(r"The chips are TPU (.*?), and NVIDIA (.*?), with", page)
    names = lambda maker, s: {f"{maker} {n.lower()}" for n in re.split(r", | and ", s)}  # noqa: E731
    assert names("tpu", said[1]) | names("nvidia", said[2]) == set(chips.CHIPS)


def test_the_mlps_flops_are_what_how_it_decides_says(mlp_target):
    """how-it-decides.md: on examples/mlp.py (JAX 0.10.2, CPU) remat-tui
    counts 8.20 MFLOP (the input's gradient among them) against XLA's 7.66
    MFLOP and 12 k transcendentals, so the estimate's compute is 7% high."""
    import jax

    import remat_tui

    page = " ".join(read("docs/how-it-decides.md").split())
    said = re.search(
        r"with JAX ([\d.]+) on CPU, the input's gradient: ([\d.]+) MFLOP against XLA's ([\d.]+) "
        r"MFLOP and (\d+) k transcendentals, so the estimate's compute is (\d+)% high",
        page,
    )
    assert said, "how-it-decides.md no longer gives the MLP's FLOPs"
    version, ours_said, xla_said, transcendentals_said, high_said = said.groups()
    a = remat_tui.analyze(mlp_target, compiled=True)
    ours = a.flops["forward"] + a.flops["backward"]
    xla, transcendentals = a.compiled.flops, a.compiled.transcendentals
    assert ours > xla  # the page's point, on any JAX: the vjp counts the input's gradient
    if jax.__version__ == version:  # its figures: the JAX it names
        assert (f"{ours / 1e6:.2f}", f"{xla / 1e6:.2f}") == (ours_said, xla_said)
        assert f"{transcendentals / 1e3:.0f}" == transcendentals_said
        assert f"{(ours - transcendentals) / xla - 1:.0%}" == f"{high_said}%"


def test_the_peak_sentences_compiled_md_quotes():
    """compiled.md: 8 layers of tanh(x @ w), x f32[2048,128], under
    nothing_saveable: the sentence it quotes, word for word; and
    examples/mlp.py under nothing_saveable (CPU, JAX 0.10.2): `residual`
    32.0 KiB at the peak, the peak the code as written's to the byte."""
    import jax
    import jax.numpy as jnp

    import remat_tui

    page = " ".join(read("docs/guide/compiled.md").split())
    version, quoted = re.search(
        r'CPU, JAX ([\d.]+)\) under `nothing_saveable`: "(peak unchanged[^"]*)"', page
    ).groups()

    def layers(x, ws):
        for w in ws:
            x = jnp.tanh(x @ w)
        return x.sum()

    f32 = jnp.float32
    args = (jax.ShapeDtypeStruct((2048, 128), f32), [jax.ShapeDtypeStruct((128, 128), f32)] * 8)
    nothing = remat_tui.analyze(
        layers, args, policy="nothing_saveable", compiled=True, vs_written=True
    )
    said = nothing.compiled.memory["explanation"]
    if jax.__version__ == version:
        assert said.startswith(quoted)
    assert said.startswith("peak unchanged against the code as written")

    if not jax.__version__.startswith("0.10."):
        return  # the page says JAX 0.12 keeps the recomputation
    said = re.search(r"so `residual` ([\d.]+ KiB) is at the peak", page)[1]
    mlp = remat_tui.load_targets(os.path.join(ROOT, "examples", "mlp.py"))["loss"]
    written = remat_tui.analyze(mlp, compiled=True)
    nothing = remat_tui.analyze(mlp, policy="nothing_saveable", compiled=True)
    assert nothing.compiled.peak_bytes == written.compiled.peak_bytes
    assert f"{nothing.compiled.memory['by_category']['residual'] / 1024:.1f} KiB" == said


@needs_tpu
def test_a_program_too_big_for_the_chip_is_over_max_peak_bytes(write_target, capsys):
    """cli.md's gates: a program too big for the chip (XLA's
    RESOURCE_EXHAUSTED) counts as over --max-peak-bytes: the report is
    written, then exit 1 naming the excess."""
    page = " ".join(read("docs/guide/cli.md").split())
    assert "A program too big for the chip (XLA's `RESOURCE_EXHAUSTED`) counts as over" in page
    path = write_target(
        "import jax, jax.numpy as jnp\nimport remat_tui\n\n"
        "@remat_tui.target(args=lambda: (jax.ShapeDtypeStruct((70000, 30000), jnp.float32),))\n"
        "def big(x):\n    return jnp.sum(jnp.sin(x @ x.T) @ x)\n"
    )
    argv = ["report", path, "--device", "tpu:v5e:2x2", "--compiled", "--max-peak-bytes", "12GiB"]
    assert cli.main(argv) == 1
    out, err = capsys.readouterr()
    assert "does not fit tpu:v5e:2x2" in out
    assert "remat-tui: over budget:" in err and "--max-peak-bytes" in err
    assert "Traceback" not in err


def test_fits_progress_is_shaped_as_fit_md_shows_it(write_target, capsys):
    """fit.md's progress line, its figures any: `remat-tui: [2/14] fit
    nothing_saveable: fits 85, not 301 -> trying 270 (9 compiles, 4 s)`."""
    page = read("docs/guide/fit.md")
    shown = re.search(r"^remat-tui: \[\d+/\d+\] fit .*$", page, re.M)[0]
    shape = re.sub(r"\d+", r"\\d+", re.escape(shown)).replace("nothing_saveable", r"\S+")
    path = write_target(
        "import jax, jax.numpy as jnp\nimport remat_tui\n\n"
        "def example(batch=4):\n"
        "    f32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.float32)\n"
        "    return f32(16, 16), f32(batch, 16)\n\n"
        "@remat_tui.target(args=example)\n"
        "def f(w, x):\n    return jnp.sum(jnp.tanh(jnp.tanh(x @ w) @ w))\n"
    )
    argv = [
        "fit",
        path,
        "--budget",
        "16KiB",
        "--policy",
        "nothing_saveable",
        "--policy",
        "as_written",
    ]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert re.search(shape, err, re.M), (shape, err)


def test_a_value_and_its_name_are_both_residuals_as_app_md_says(mlp_target):
    """app.md: in examples/mlp.py `output of tanh` and `named 'layer0'`, 16 KiB
    each, with JAX 0.10; 0.11 and later save `one_minus_square` in tanh's
    output's place. JAX's own list is the oracle."""
    import jax
    from conftest import jax_saved_residuals

    import remat_tui

    page = " ".join(read("docs/guide/app.md").split())
    said = re.search(r"\(`output of (\w+)` and `named '(\w+)'` in `examples/mlp.py` with JAX "
                     r"([\d.]+), (\d+) KiB each\)", page)  # fmt: skip
    assert said, "app.md no longer names the two residuals"
    value, name, version, kib = said.groups()
    if not jax.__version__.startswith(version + "."):
        value = "one_minus_square"  # the page's note on JAX 0.11 and later
    a = remat_tui.analyze(mlp_target)
    jax_lines = jax_saved_residuals(mlp_target.fn, "as_written", mlp_target.args(), {})
    for words in (f"output of {value} ", f"named '{name}' "):
        mine = next(r for r in a.residuals if words in r.text)
        assert mine.bytes == int(kib) * 1024, words
        assert any(words in line for line in jax_lines), (words, jax_lines)
