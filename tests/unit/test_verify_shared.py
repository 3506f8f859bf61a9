"""Issue 43, honest limits: `--measure` and verify share their runs where
both are asked for (core/xla/run/shared_runs.py). The configuration's step is
compiled once, its first, untimed run is on verify's inputs, and those
outputs are verify's: verifying adds only the code as written's compile and
runs. Counted by wrapping `compile_step` and the executables it returns; the
oracle for the inputs is `jax.value_and_grad` by hand on verify's seeded
draws."""

import collections
import json

import jax
import numpy as np
import pytest
from conftest import example

import remat_tui
from remat_tui import cli
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.policies import as_spec, checkpoint_policy
from remat_tui.core.xla.run import measure as measure_module
from remat_tui.core.xla.run import shared_runs
from remat_tui.core.xla.run.measure import measure
from remat_tui.core.xla.verify import runs as verify_module

MLP = example("mlp.py")
POLICY = "dots_saveable"


@pytest.fixture
def counted(monkeypatch):
    """{configuration label: [compiles, runs]} of every step compile_step
    compiles for measure or verify in the test (runs: calls of its
    executable)."""
    seen: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    real = measure_module.compile_step

    def compile_step(target, config, *args, **kwargs):
        step = real(target, config, *args, **kwargs)
        whole = config.site_specs or config.structure  # else by its policy alone
        tally = seen[config.with_device(None).label() if whole else config.spec.canonical]
        tally[0] += 1
        executable = step.executable
        if executable is None:
            return step

        def run(*inputs):
            tally[1] += 1
            return executable(*inputs)

        return step._replace(executable=run)

    monkeypatch.setattr(measure_module, "compile_step", compile_step)
    monkeypatch.setattr(verify_module, "compile_step", compile_step)
    shared_runs.forget()
    yield seen
    shared_runs.forget()


def _advance_measures_generator():
    """Measure another configuration first: measure's own generator (one for
    the process) is then past the draws a fresh seed gives, so only a
    measure that takes verify's inputs runs on verify's values."""
    target = remat_tui.load_targets(MLP)["loss"]
    measure(target, Config.make("nothing_saveable"), runs=1)


def test_report_measure_verify_compiles_and_runs_the_configuration_once(counted, capsys):
    _advance_measures_generator()
    counted.clear()
    status = cli.main(["report", MLP, "--policy", POLICY, "--measure", "--runs", "2",
                       "--verify", "--format", "json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert status == 0, out["gradients"]
    assert out["gradients"]["verdict"] == "equal"
    assert out["measured"]["runs"] == 2
    # The configuration: one compile, the warm-up and two timed runs, nothing
    # more for verify. The code as written: verify's reference, compiled and
    # run once (and once more compiled otherwise, outside compile_step).
    assert dict(counted) == {POLICY: [1, 3], "as_written": [1, 1]}


def test_the_measured_first_run_is_verify_s_run_on_verify_s_inputs(counted):
    """The kept outputs are what JAX gives on verify's seeded draws: the loss
    and each gradient of `jax.value_and_grad` under the policy, by hand."""
    _advance_measures_generator()
    target = remat_tui.load_targets(MLP)["loss"]
    config = Config.make(POLICY)
    with shared_runs.sharing(True):
        measure(target, config, runs=1)
    ran = shared_runs.kept(target, config, "cpu:0", shared_runs.SEED)
    assert ran is not None and ran.drawn == len(jax.tree.leaves(target.args())) and not ran.given

    rng = np.random.default_rng(shared_runs.SEED)  # measure.py's filler, leaf by leaf
    args = jax.tree.map(
        lambda s: np.asarray(0.1 * rng.standard_normal(s.shape, dtype=np.float32), s.dtype),
        target.args(),
    )
    policy = checkpoint_policy(as_spec(POLICY))
    value, grads = jax.jit(jax.value_and_grad(jax.checkpoint(target.fn, policy=policy)))(*args)
    loss, got = ran.outputs
    np.testing.assert_allclose(loss, value, rtol=1e-6)
    for g, want in zip(got, jax.tree.leaves(grads), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7)

    # And verify takes it: no compile of the configuration, the same verdict.
    counted.clear()
    v = verify_module.verify(target, config)
    assert v.verdict == "equal"
    assert counted[POLICY] == [0, 0]


def test_api_analyze_measure_verify_shares_the_run(counted):
    _advance_measures_generator()
    counted.clear()
    target = remat_tui.load_targets(MLP)["loss"]
    a = remat_tui.analyze(target, policy=POLICY, measure=True, runs=1, verify=True)
    assert a.gradients is not None and a.gradients.verdict == "equal"
    assert counted[POLICY] == [1, 2]


def test_compare_measure_verify_verifies_each_row_from_its_measured_run(counted, capsys):
    _advance_measures_generator()
    counted.clear()
    status = cli.main(["compare", MLP, "--policy", POLICY, "--policy", "nothing_saveable",
                       "--measure", "--runs", "1", "--verify", "--format", "json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert status == 0
    verdicts = {row["policy"]: row["gradients"]["verdict"] for row in out["rows"]}
    assert set(verdicts.values()) <= {"equal", "agree"}, verdicts
    for label in (POLICY, "nothing_saveable"):
        assert counted[label] == [1, 2], (label, dict(counted))


def test_without_verify_measure_keeps_nothing(counted):
    target = remat_tui.load_targets(MLP)["loss"]
    measure(target, Config.make(POLICY), runs=1)
    assert shared_runs.kept(target, Config.make(POLICY), "cpu:0", shared_runs.SEED) is None


def test_a_run_too_large_to_keep_is_verified_by_running_it_again(counted, monkeypatch):
    """Kept runs stay within their memory budget: a run larger than it is not
    kept, and verify compiles and runs that configuration itself."""
    target = remat_tui.load_targets(MLP)["loss"]
    config = Config.make(POLICY)
    monkeypatch.setattr(shared_runs, "_budget", lambda: 1024)  # the MLP's gradients are more
    with shared_runs.sharing(True):
        measure(target, config, runs=1)
    assert shared_runs.kept(target, config, "cpu:0", shared_runs.SEED) is None
    assert verify_module.verify(target, config).verdict == "equal"
    assert counted[POLICY] == [2, 3]


def test_suggest_measure_verify_verifies_its_answer_from_its_measured_run(
    counted, capsys, monkeypatch
):
    # Every candidate's run kept: which is fastest, and so the answer, is the
    # machine's noise's to say (KEPT bounds the runs kept, not this seam).
    monkeypatch.setattr(shared_runs._runs, "limit", 64)
    status = cli.main(["suggest", MLP, "--budget", "1GiB", "--measure", "--runs", "1",
                       "--verify", "--format", "json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert status == 0
    assert out["gradients"]["verdict"] in ("equal", "agree")
    answer = Config.make(out["best"]["policy"]).spec.canonical
    if answer != "as_written":  # the code as written is verify's reference besides
        assert counted[answer] == [1, 2], (answer, dict(counted))


def _table_loss(table, tokens):
    return jax.numpy.mean(jax.numpy.tanh(table[tokens]) ** 2)


def test_the_measure_runs_on_the_targets_verify_args(counted):
    """verify_args of the example's shapes are the measure's inputs too, and
    what it kept is JAX's gradient on them."""
    from remat_tui.registry import Target

    jnp = jax.numpy
    shapes = (jax.ShapeDtypeStruct((50, 8), jnp.float32), jax.ShapeDtypeStruct((12,), jnp.int32))
    given = (jnp.ones((50, 8)) * jnp.arange(50.0)[:, None] / 50, jnp.arange(12) * 4)
    target = Target(fn=_table_loss, name="loss", args=shapes, verify_args=lambda: given)
    config = Config.make("nothing_saveable")
    with shared_runs.sharing(True):
        measure(target, config, runs=1)
    ran = shared_runs.kept(target, config, "cpu:0", shared_runs.SEED)
    assert ran is not None and (ran.given, ran.drawn) == (2, 0)
    value, grad = jax.value_and_grad(_table_loss)(*given)
    np.testing.assert_allclose(ran.outputs[0], value, rtol=1e-6)
    np.testing.assert_allclose(ran.outputs[1][0], grad, rtol=1e-5, atol=1e-8)
    v = verify_module.verify(target, config)
    assert v.ok and v.inputs == {"seed": 0, "given": 2, "drawn": 0}
    assert counted["nothing_saveable"] == [1, 2]


def test_verify_args_of_other_shapes_are_not_shared(counted):
    from remat_tui.registry import Target

    jnp = jax.numpy
    shapes = (jax.ShapeDtypeStruct((50, 8), jnp.float32), jax.ShapeDtypeStruct((12,), jnp.int32))
    given = (jnp.ones((50, 8)), jnp.arange(6))  # six tokens, not twelve
    target = Target(fn=_table_loss, name="loss", args=shapes, verify_args=lambda: given)
    config = Config.make("nothing_saveable")
    with shared_runs.sharing(True):
        measure(target, config, runs=1)
    assert shared_runs.kept(target, config, "cpu:0", shared_runs.SEED) is None
    assert verify_module.verify(target, config).ok
    assert counted["nothing_saveable"] == [2, 3]


def test_a_training_step_shares_its_first_run_before_donating_it(counted):
    """A training step donates its parameters: the measure runs on copies of
    verify's inputs, keeps the first run's new parameters, and the timed runs
    carry on from them; verify compares the kept loss and parameters."""
    import os

    from conftest import ROOT

    from remat_tui.registry import Target

    optax = pytest.importorskip("optax")
    noisy = remat_tui.load_targets(os.path.join(ROOT, "tests", "models", "stateful_noise.py"))
    base = noisy["loss"]
    module = base.fn.__globals__
    trained = Target(fn=base.fn, name="loss", args=base.args, param_positions=(0,),
                     optimizer=optax.sgd(0.1))  # fmt: skip
    module["draws"][0] = 0
    config = Config.make("everything_saveable")
    with shared_runs.sharing(True):
        measure(trained, config, runs=2)
    ran = shared_runs.kept(trained, config, "cpu:0", shared_runs.SEED)
    assert ran is not None and ran.carried == 2
    v = verify_module.verify(trained, config)
    assert v.step == "train" and v.ok, [leaf.to_dict() for leaf in v.leaves]
    assert [leaf.path for leaf in v.leaves] == ["loss", "params['W1']", "params['W2']"]
    assert counted["everything_saveable"] == [1, 3]


def test_suggest_measure_verify_drops_a_differing_answer_from_its_measured_run(
    counted, capsys, monkeypatch
):
    """The deep stateful model: within the compiled peak of its layer under
    nothing_saveable (by hand, XLA's own memory_analysis), only that
    recomputing configuration fits, and it recomputes the noise. Its
    measured first run is what verify compares, and it differs: dropped,
    without compiling it again."""
    import os

    from conftest import ROOT

    deep = os.path.join(ROOT, "tests", "models", "stateful_noise_deep.py")
    target = remat_tui.load_targets(deep)["loss"]
    module = target.fn.__globals__
    recomputing = module["loss_under"](jax.checkpoint_policies.nothing_saveable)

    def peak(fn):
        m = jax.jit(jax.value_and_grad(fn)).lower(*target.args()).compile().memory_analysis()
        return (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
                - m.alias_size_in_bytes)  # fmt: skip

    budget = peak(recomputing)
    assert peak(target.fn) > budget  # the premise: the code as written does not fit
    module["draws"][0] = 0
    monkeypatch.setattr(shared_runs._runs, "limit", 64)
    status = cli.main(["suggest", deep, "--budget", str(budget), "--measure", "--runs", "1",
                       "--verify", "--format", "json"])  # fmt: skip
    said = json.loads(capsys.readouterr().out)
    assert status == 0
    label = "policy as_written; site layer: nothing_saveable"
    dropped = {f["configuration"]: f for f in said["verify_failed"]}
    assert dropped[label]["verdict"] == "differ"
    assert counted[label] == [1, 2]
