"""Issue 31: one program, one compile, everywhere, and remembered across runs.

Compiles are counted where XLA compiles: `jax.stages.Lowered.compile`, which
every compile of remat-tui calls (with XLA's dump or without)."""

import importlib
import json
import os
import subprocess
import sys
import textwrap

import jax
import pytest
from conftest import example, jax_saved_residuals

import remat_tui
from remat_tui import cli
from remat_tui.core.search.compare import candidates, compare
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.core.trace.analysis import row_view
from remat_tui.core.trace.traced import trace_config
from remat_tui.core.xla.compile import costs as compiled
from remat_tui.core.xla.compile import lowering as lowering_module
from remat_tui.core.xla.compile import service as compile_service

MLP = example("mlp.py")


@pytest.fixture
def lowered_texts(monkeypatch):
    """The module text of every step lowered (core/xla/compile/lowering.py), from now on."""
    texts = Texts()
    real = compiled.lower

    def spy(*args, **kwargs):
        step = real(*args, **kwargs)
        texts.append(step.lowered.as_text())
        steps.add(id(step.lowered))
        return step

    steps: set = set()
    texts.steps = steps
    monkeypatch.setattr(compiled, "lower", spy)
    return texts


class Texts(list):
    steps: set


@pytest.fixture
def xla_compiles(monkeypatch, lowered_texts):
    """How many times XLA compiled a step, from now on (not the CPU's
    calibration, which compiles programs of its own)."""
    made = []
    real = jax.stages.Lowered.compile

    def counted(self, *args, **kwargs):
        if id(self) in lowered_texts.steps:
            made.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(jax.stages.Lowered, "compile", counted)
    compiled.clear_cache()
    return made


def test_a_report_under_a_policy_compiles_once(xla_compiles, capfd):
    """`report --policy X --compiled` compiled the code as written too, for the
    'peak unchanged' sentence; now only when asked (--vs-written)."""
    argv = ["report", MLP, "--policy", "nothing_saveable", "--compiled", "--format", "json"]
    assert cli.main(argv) == 0
    assert len(xla_compiles) == 1
    assert json.loads(capfd.readouterr().out)["compiled"]["fits"]
    compiled.clear_cache()
    compile_service.clear_memo()
    assert cli.main([*argv, "--vs-written"]) == 0
    assert len(xla_compiles) == 3  # the policy's program and the code as written's


def test_compare_compiles_each_program_once(xla_compiles, lowered_texts):
    """Four configurations lowering to two programs: two compiles. (Given as
    an explicit list, the four rows stay: the program's key merges them.)"""
    target = remat_tui.load_targets(MLP)["loss"]
    specs = ["nothing_saveable", "save_only_these_names()", "everything_saveable",
             "save_anything_except_these_names('layer0')"]  # fmt: skip
    result = compare(target, policies=specs, compiled=True)
    assert [r.config.policy for r in result.rows] == [policies.parse(s).canonical for s in specs]
    programs = set(lowered_texts[-len(specs) :])
    assert len(programs) == 2  # JAX lowers each pair to one module
    assert len(xla_compiles) == len(programs)
    first, second = result.rows[0].compiled, result.rows[1].compiled
    assert first == second  # the same numbers, to the byte


def test_a_second_suggest_compiles_nothing_and_says_the_same(xla_compiles, store_on):
    target = remat_tui.load_targets(MLP)["loss"]
    first = remat_tui.suggest(target, 1024, compiled=True).to_dict()
    made = len(xla_compiles)
    assert made >= 1 and os.listdir(store_on / "remat-tui" / "compiles")
    compiled.clear_cache()  # a new process: nothing known but the store
    compile_service.clear_memo()
    second = remat_tui.suggest(target, 1024, compiled=True).to_dict()
    assert len(xla_compiles) == made  # nothing compiled
    assert _without_timings(second) == _without_timings(first)


def test_a_report_answered_by_the_store_names_its_residuals_as_compiled(xla_compiles, store_on):
    """What the forward work makes (Compiled.made) is kept with the numbers, so
    a report from the store names the residuals at the peak and says what XLA
    made of each, as the compile did (Contract 14 across runs)."""
    target = remat_tui.load_targets(MLP)["loss"]
    first = remat_tui.analyze(target, policy="save_only_these_names('layer1')", compiled=True)
    made = len(xla_compiles)
    assert made == 1 and first.compiled.made
    compiled.clear_cache()  # a new process: nothing known but the store
    compile_service.clear_memo()
    second = remat_tui.analyze(target, policy="save_only_these_names('layer1')", compiled=True)
    assert len(xla_compiles) == made  # nothing compiled
    assert second.compiled.made == first.compiled.made
    named = [b["residual"] for b in first.compiled.memory["at_peak"]]
    assert any(named) and [b["residual"] for b in second.compiled.memory["at_peak"]] == named
    assert [r.to_dict()["story"] for r in second.residuals] == [
        r.to_dict()["story"] for r in first.residuals
    ]


def test_the_second_run_of_a_command_is_answered_by_the_store(remat_tui_cmd, store_on, tmp_path):
    """Two processes, one cache folder: the second compiles nothing, and
    writes the same JSON (the estimate's CPU rates aside, issue 31 item 5)."""
    command = [remat_tui_cmd, "suggest", MLP, "--budget", "1KiB", "--compiled", "--format", "json"]
    runs = [subprocess.run(command, capture_output=True, text=True, timeout=300) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr[-2000:]
    assert "answered by the compile cache" not in runs[0].stderr
    assert "compiles: 0 programs compiled," in runs[1].stderr
    assert "answered by the compile cache" in runs[1].stderr
    first, second = (json.loads(r.stdout) for r in runs)
    assert _without_timings(second) == _without_timings(first)
    listed = subprocess.run([remat_tui_cmd, "cache"], capture_output=True, text=True)
    assert str(store_on / "remat-tui" / "compiles") in listed.stdout
    cleared = subprocess.run([remat_tui_cmd, "cache", "clear"], capture_output=True, text=True)
    assert cleared.returncode == 0 and "cleared" in cleared.stdout
    assert not os.listdir(store_on / "remat-tui" / "compiles")
    bypass = subprocess.run([*command, "--no-cache"], capture_output=True, text=True, timeout=300)
    assert bypass.returncode == 0 and not os.listdir(store_on / "remat-tui" / "compiles")


SOURCE = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    import remat_tui

    @remat_tui.target(args=lambda: (jax.ShapeDtypeStruct(({n}, 8), jnp.float32),))
    def loss(x):
        return jnp.sum(jnp.{op}(x) ** 2)
    """
)


def test_the_store_is_never_stale(write_target, xla_compiles, store_on, monkeypatch):
    """A changed file, argument shape, option or version is a new key: a
    miss, compiled; the same again is a hit."""

    def numbers(path, memory=False):
        compiled.clear_cache()
        compile_service.clear_memo()  # as a new process would
        target = remat_tui.load_targets(path)["loss"]
        return compiled.compile_answer(target, Config(), memory=memory).result

    def compiles(step) -> int:
        before = len(xla_compiles)
        step()
        return len(xla_compiles) - before

    path = write_target(SOURCE.format(n=4, op="sin"))
    assert compiles(lambda: numbers(path)) == 1
    assert compiles(lambda: numbers(path)) == 0  # the same program: the store answers
    path = write_target(SOURCE.format(n=4, op="cos"))  # the file changed
    assert compiles(lambda: numbers(path)) == 1
    path = write_target(SOURCE.format(n=16, op="cos"))  # another argument shape
    assert compiles(lambda: numbers(path)) == 1
    assert compiles(lambda: numbers(path, memory=True)) == 1  # another option: the breakdown
    assert compiles(lambda: numbers(path, memory=False)) == 0  # ... which answers without it
    real = jax.__version__
    compile_service._versions.cache_clear()
    monkeypatch.setattr(jax, "__version__", real + ".post1")  # another JAX
    try:
        assert compiles(lambda: numbers(path)) == 1
    finally:
        monkeypatch.setattr(jax, "__version__", real)
        compile_service._versions.cache_clear()
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_cpu_use_thunk_runtime=true"
    monkeypatch.setenv("XLA_FLAGS", flags)
    assert compiles(lambda: numbers(path)) == 1  # other flags


def test_a_library_one_command_imports_is_no_new_program(tmp_path, xla_compiles, store_on,
                                                         monkeypatch):  # fmt: skip
    """Issue 41: fit compiled again what report --compiled had just compiled.
    A breakdown's key digests the user's files it may name: those imported
    from the target's folder. A project keeps its virtual environment there
    (.venv/lib/python3.11/site-packages), and each command imports other
    modules of the installed packages (fit what report does not): the key
    differed. Installed packages are nobody's lines to name."""
    project = tmp_path / "project"
    packages = project / ".venv" / "lib" / "python3.11" / "site-packages"
    packages.mkdir(parents=True)
    (packages / "installed_41.py").write_text("VALUE = 1\n")
    path = project / "model.py"
    path.write_text(SOURCE.format(n=4, op="sin"))
    target = remat_tui.load_targets(str(path))["loss"]
    compiled.compile_answer(target, Config(), memory=True)  # as report --compiled
    assert len(xla_compiles) == 1
    compiled.clear_cache()  # a new process: nothing known but the store
    compile_service.clear_memo()
    monkeypatch.syspath_prepend(str(packages))
    try:
        importlib.import_module("installed_41")  # what the next command imports beside
        compiled.compile_answer(target, Config())  # as fit asks: the store answers
    finally:
        sys.modules.pop("installed_41", None)
    assert len(xla_compiles) == 1


def test_the_store_keeps_within_its_limit(tmp_path):
    from remat_tui.core.xla.compile.store import Store

    store = Store(tmp_path, limit=3000)
    for i in range(10):
        store.put(f"{i:064x}", {"compiled": {"padding": "x" * 500}})
        os.utime(store._path(f"{i:064x}"), (i, i))  # in order of use
    kept = sorted(e.name for e in store.entries())
    assert sum(os.path.getsize(tmp_path / n) for n in kept) <= 3000
    assert kept and kept[-1].startswith(f"{9:064x}")  # the most recent stay
    assert store.get(f"{0:064x}") is None
    (tmp_path / f"{9:064x}.json").write_text("{torn")
    assert store.get(f"{9:064x}") is None  # unreadable: a miss, removed
    assert not (tmp_path / f"{9:064x}.json").exists()


EQUAL_DECISIONS = [
    ("save_only_these_names()", "nothing_saveable"),
    ("save_anything_except_these_names('h')", "everything_saveable"),
    (
        "save_and_offload_only_these_names(names_which_can_be_saved=['h'], "
        "names_which_can_be_offloaded=[], offload_src='device', offload_dst='pinned_host')",
        "save_only_these_names('h')",
    ),
    ("save_from_both_policies(nothing_saveable, save_only_these_names('h'))",
     "save_only_these_names('h')"),
    ("save_from_both_policies(save_only_these_names('h'), everything_saveable)",
     "everything_saveable"),
    ("save_from_both_policies(save_only_these_names('h'), save_only_these_names('g'))",
     "save_only_these_names('g', 'h')"),
    ("save_from_both_policies(dots_with_no_batch_dims_saveable, dots_saveable)", "dots_saveable"),
]  # fmt: skip


def named(x, w):
    from jax.ad_checkpoint import checkpoint_name

    h = checkpoint_name(jax.numpy.sin(x @ w), "h")
    g = checkpoint_name(jax.numpy.cos(h @ w), "g")
    return jax.numpy.sum(jax.numpy.tanh(g @ w))


@pytest.mark.parametrize("spelling,merged", EQUAL_DECISIONS)
def test_policies_merged_decide_alike_by_jax(spelling, merged):
    """The merge claims the two save the same values: JAX's own lists agree."""
    args = (jax.numpy.ones((4, 8)), jax.numpy.ones((8, 8)))
    spec = policies.parse(spelling)
    assert policies.same_decisions(spec) == policies.same_decisions(policies.parse(merged))
    assert jax_saved_residuals(named, spelling, args, {}) == jax_saved_residuals(
        named, merged, args, {}
    )


def test_save_any_names_but_these_is_not_merged_with_everything():
    """It saves named values only: not everything_saveable, whatever its names."""
    args = (jax.numpy.ones((4, 8)), jax.numpy.ones((8, 8)))
    spec = policies.parse("save_any_names_but_these()")
    assert policies.same_decisions(spec) != policies.same_decisions(policies.parse(
        "everything_saveable"))  # fmt: skip
    assert jax_saved_residuals(named, "save_any_names_but_these()", args, {}) != (
        jax_saved_residuals(named, "everything_saveable", args, {})
    )


def test_candidates_that_decide_alike_are_merged_before_tracing(monkeypatch):
    """compare's candidates hold no two configurations that decide alike, so
    none is traced twice; suggest's space counts each once too."""
    target = remat_tui.load_targets(MLP)["loss"]
    base = Config()
    baseline = row_view(trace_config(target, base))
    configs = candidates(target, baseline, base)
    specs = [c.spec for c in configs]
    assert len({policies.same_decisions(s) for s in specs}) == len(specs)
    # the empty name list is spelt nothing_saveable, the built-in that comes first
    assert "save_only_these_names()" not in [c.policy for c in configs]
    from remat_tui.core.search.suggest import candidates as suggest_candidates

    choices = suggest_candidates.choices(target, [n.name for n in baseline.names])
    spelt = [c.canonical for c in choices]
    assert "save_only_these_names()" not in spelt and "nothing_saveable" in spelt


def _without_timings(report: dict) -> dict:
    """The JSON without what is measured in time (the compile's seconds, the
    estimate's CPU rates: issue 31, items 5-6)."""

    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k not in ("seconds", "time")}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o

    return strip(report)


def test_no_test_writes_the_users_cache():
    assert os.environ["XDG_CACHE_HOME"] != os.path.join(os.path.expanduser("~"), ".cache")
    assert lowering_module is not None and sys.modules.get("remat_tui.core.xla.compile.service")


def test_worker_processes_give_the_rows_of_compiling_here(write_target, monkeypatch):
    """--jobs 2: compare's compiles in two worker processes, the same rows."""
    from remat_tui.core.xla.run import pool as compile_pool

    path = write_target(SOURCE.format(n=8, op="tanh"))
    target = remat_tui.load_targets(path)["loss"]
    specs = ["as_written", "nothing_saveable", "everything_saveable"]

    def rows(jobs):
        compiled.clear_cache()
        compile_service.clear_memo()
        compile_pool.configure(jobs=jobs)
        try:
            return [_without_timings(r.to_dict()) for r in compare(
                target, policies=specs, compiled=True).rows]  # fmt: skip
        finally:
            compile_pool.configure()

    here = rows(1)
    before = compile_service.counts.snapshot()
    there = rows(2)
    made = compile_service.counts.snapshot()["in_workers"]
    assert made > before["in_workers"], compile_pool.notices
    assert there == here
