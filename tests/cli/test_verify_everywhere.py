"""`--verify` on report, compare and fit --optimize (issue 43, Wanted 2),
with JAX as the oracle: the step's gradients computed by hand with
`jax.value_and_grad` under each policy against the code as written's.

A configuration that recomputes a `jax.pure_callback` over Python state runs
it again in the backward pass: its gradients differ. report --verify says so
in one line and exits 1; compare --verify marks its row (≠, never ★); fit
--optimize --verify never answers with it. On a deviceless TPU topology
--verify exits 2 before anything is compiled, claiming nothing.
"""

import importlib.util
import json
import os

import jax
import numpy as np
import pytest
from conftest import ROOT, example
from exact_oracle import hand_peak_and_counts

import remat_tui
from remat_tui import cli

NOISY = os.path.join(ROOT, "tests", "models", "stateful_noise.py")
DEEP = os.path.join(ROOT, "tests", "models", "stateful_noise_deep.py")
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
CP = jax.checkpoint_policies
KEYS = {"verdict", "bitwise_leaves", "max_abs", "max_rel", "tolerance", "device"}


def gradients(loss, args, module):
    """{leaf path: value} of the loss and its gradient, by jax.value_and_grad,
    the callback's draws counted from 0 as a step starts."""
    module["draws"][0] = 0
    value, grads = jax.jit(jax.value_and_grad(loss))(*args)
    leaves = jax.tree_util.tree_flatten_with_path(grads)[0]
    return {"loss": np.asarray(value),
            **{f"params{jax.tree_util.keystr(p)}": np.asarray(g) for p, g in leaves}}  # fmt: skip


def largest_differences(a, b):
    return {k: float(np.max(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)))) for k in a}


def noisy_by_hand(policy):
    """The stateful_noise model's gradients with its whole loss under `policy`
    (None: as written), and as written."""
    target = remat_tui.load_targets(NOISY)["loss"]
    module, args = target.fn.__globals__, target.args()
    written = gradients(target.fn, args, module)
    if policy is None:
        return written, written
    return gradients(jax.checkpoint(target.fn, policy=policy), args, module), written


def json_of(capsys, argv, status):
    assert cli.main(argv) == status, capsys.readouterr().err[-2000:]
    return json.loads(capsys.readouterr().out)


def test_compare_verify_marks_recomputing_the_callback_and_never_stars_it(capsys):
    policies = ["--policy", "everything_saveable", "--policy", "nothing_saveable"]
    plain = json_of(capsys, ["compare", NOISY, *policies, "--format", "json"], 0)
    rows = {r["policy"]: r for r in plain["rows"]}
    assert rows["nothing_saveable"]["pareto"] and rows["nothing_saveable"]["gradients"] is None

    said = json_of(capsys, ["compare", NOISY, *policies, "--verify", "--format", "json"], 0)
    rows = {r["policy"]: r for r in said["rows"]}
    for policy, verdicts in (("nothing_saveable", {"differ"}),
                             ("everything_saveable", {"equal", "agree"})):  # fmt: skip
        got = rows[policy]["gradients"]
        assert KEYS <= set(got) and got["verdict"] in verdicts, (policy, got["verdict"])
        # JAX's own gradients under the policy: past each leaf's tolerance
        # exactly where the row says its gradients differ.
        by_hand, written = noisy_by_hand(getattr(CP, policy))
        moved = {k for k, d in largest_differences(by_hand, written).items()
                 if d > next(x["tolerance"] for x in got["leaves"] if x["path"] == k)}  # fmt: skip
        assert moved == {x["path"] for x in got["leaves"] if not x["within"]}
        assert bool(moved) == (policy == "nothing_saveable")
    assert not rows["nothing_saveable"]["pareto"]
    assert any("gradients differ" in n for n in rows["nothing_saveable"]["notes"])

    assert cli.main(["compare", NOISY, *policies, "--verify"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if " nothing_saveable " in x)
    # The mark column: differs, never ★, and runs the callback again (↻).
    assert line.split()[0] == "≠↻"
    assert next(x for x in out.splitlines() if " everything_saveable " in x).split()[0] in (
        "★✓",
        "✓",
    )
    assert "≠: they differ" in out


def test_report_verify_says_the_verdict_in_json_and_one_line(capsys):
    said = json_of(capsys, ["report", NOISY, "--policy", "nothing_saveable", "--verify",
                            "--format", "json"], 1)  # fmt: skip
    got = said["gradients"]
    assert KEYS <= set(got) and got["verdict"] == "differ" and got["device"] == "cpu:0"
    by_hand, written = noisy_by_hand(CP.nothing_saveable)
    difference = largest_differences(by_hand, written)
    for leaf in got["leaves"]:  # what verify measured is JAX's own difference
        assert leaf["max_abs"] == pytest.approx(difference[leaf["path"]], rel=1e-4, abs=1e-7)

    same = json_of(capsys, ["report", NOISY, "--policy", "everything_saveable", "--verify",
                            "--format", "json"], 0)  # fmt: skip
    assert same["gradients"]["verdict"] in ("equal", "agree")
    plain = json_of(capsys, ["report", NOISY, "--format", "json"], 0)
    assert plain["gradients"] is None

    assert cli.main(["report", NOISY, "--policy", "nothing_saveable", "--verify"]) == 1
    out, err = capsys.readouterr()
    said_lines = [x for x in out.splitlines() if x.startswith("verify: ")]
    assert len(said_lines) == 1 and said_lines[0].startswith("verify: gradients differ: 2 of 3")
    assert "remat-tui: gradients differ" in err and "Traceback" not in err


def test_fit_optimize_verify_never_answers_with_differing_gradients(capsys):
    """The deep model's layer under nothing_saveable fits batch 16 within a
    budget where the code as written fits only 8: fit --optimize answers 16
    with it; with --verify it is dropped, and no row's answer differs."""
    target = remat_tui.load_targets(DEEP)["loss"]
    module = target.fn.__globals__
    recomputing = module["loss_under"](CP.nothing_saveable)
    budget = hand_peak_and_counts(target.fn, target.args(8))[0]
    assert hand_peak_and_counts(target.fn, target.args(16))[0] > budget  # premises
    assert hand_peak_and_counts(recomputing, target.args(16))[0] <= budget
    differs = largest_differences(gradients(recomputing, target.args(16), module),
                                  gradients(target.fn, target.args(16), module))  # fmt: skip
    assert max(differs.values()) > 1e-3

    argv = ["fit", DEEP, "--optimize", "--budget", str(budget), "--multiple", "8",
            "--max-batch", "16", "--format", "json"]  # fmt: skip
    plain = json_of(capsys, argv, 0)
    assert plain["rows"][0]["batch"] == 16  # a recomputing answer, unverified
    said = json_of(capsys, [*argv, "--verify"], 0)
    dropped = [f for r in said["rows"] for f in r["verify_failed"]]
    assert "policy as_written; site layer: nothing_saveable" in {
        f["configuration"] for f in dropped
    }
    assert all(f["verdict"] == "differ" for f in dropped)
    answered = [r for r in said["rows"] if r["batch"]]
    assert [r["batch"] for r in answered] == [8]
    for row in answered:
        assert KEYS <= set(row["gradients"]) and row["gradients"]["verdict"] in ("equal", "agree")
        assert row["sites"].get("layer") in (None, "as_written", "everything_saveable")
        assert row["structure"] is None and row["spec"] == "as_written"
        # ... and JAX agrees: what it answers with computes the code as written's gradients.
        site = row["sites"].get("layer", "everything_saveable")
        policy = None if site == "as_written" else getattr(CP, site)
        args = target.args(row["batch"])
        pasted = gradients(module["loss_under"](policy), args, module)
        assert max(largest_differences(pasted, gradients(target.fn, args, module)).values()) < 1e-6


def test_fit_verify_needs_optimize(capsys):
    status = cli.main(["fit", DEEP, "--budget", "1MiB", "--verify"])
    err = capsys.readouterr().err
    assert status == 2 and "add --optimize" in err and "Traceback" not in err


@pytest.mark.skipif(not HAS_LIBTPU, reason="needs the tpu extra (libtpu)")
@pytest.mark.parametrize(
    "argv",
    [
        ["report"],
        ["compare", "--policy", "nothing_saveable"],
        ["suggest", "--budget", "1GiB"],
        ["fit", "--optimize", "--budget", "1GiB"],
    ],
)
def test_a_deviceless_topology_exits_2_and_claims_nothing(capsys, argv):
    command, *options = argv
    status = cli.main([command, example("mlp.py"), *options, "--device", "tpu:v5e:2x2",
                       "--verify"])  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    said = [line for line in err.splitlines() if line.startswith("remat-tui: error:")]
    assert len(said) == 1 and "deviceless TPU topology" in said[0]
    assert "nothing is claimed" in said[0] and "Traceback" not in err


def test_the_api_takes_verify_as_the_commands_do():
    target = remat_tui.load_targets(NOISY)["loss"]
    a = remat_tui.analyze(target, policy="nothing_saveable", verify=True)
    assert a.gradients.verdict == "differ" and a.to_dict()["gradients"]["verdict"] == "differ"
    assert remat_tui.analyze(target, policy="nothing_saveable").gradients is None
    c = remat_tui.compare(target, policies=["nothing_saveable", "everything_saveable"],
                          verify=True)  # fmt: skip
    verdicts = {r.config.policy: r.gradients.verdict for r in c.rows}
    assert verdicts["nothing_saveable"] == "differ"
    assert verdicts["everything_saveable"] in ("equal", "agree")
    assert not next(r for r in c.rows if r.config.policy == "nothing_saveable").pareto
