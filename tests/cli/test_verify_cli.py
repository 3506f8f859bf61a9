"""`remat-tui verify`, run as a user runs it (Contract 18): exit 0 when the
gradients agree with the code as written's, 1 when they differ, naming the
leaves; 2 on bad input, and on a deviceless TPU topology, where nothing can
run and nothing is claimed."""

import importlib.util
import json
import os
import subprocess

import pytest
from conftest import ROOT, example

from remat_tui import cli

NOISY = os.path.join(ROOT, "tests", "models", "stateful_noise.py")
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None


def test_recomputing_the_callback_exits_1_naming_the_leaves(remat_tui_cmd):
    run = subprocess.run([remat_tui_cmd, "verify", NOISY, "--policy", "nothing_saveable"],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 1, run.stderr[-2000:]
    first, *leaves, callback, decisions, culprit = run.stdout.splitlines()
    assert first.startswith("gradients differ: 2 of 3 leaves past their tolerance")
    assert "policy nothing_saveable on cpu:0" in first
    assert [line.split()[0] for line in leaves] == ["params['W1']", "params['W2']"]
    # ... and the line of the callback that the backward pass runs again.
    with open(NOISY) as fh:
        line = next(i for i, text in enumerate(fh, 1) if "jax.pure_callback(_draw" in text)
    assert f"calls back to Python: pure_callback at stateful_noise.py:{line};" in callback
    # ... and the one decision that moved them (issue 43, explain a difference).
    assert (
        decisions
        == "  decisions against the code as written (1): the outer policy nothing_saveable"
    )
    assert culprit.startswith("  culprit: the outer policy nothing_saveable changes params['W")
    assert culprit.endswith(
        f"the pure_callback at stateful_noise.py:{line} runs again in the backward pass"
    )
    assert "Traceback" not in run.stderr


def test_saving_the_callbacks_value_exits_0(capsys):
    assert cli.main(["verify", NOISY, "--policy", "everything_saveable"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("same gradients") and len(out.splitlines()) == 1


def test_json_says_the_verdict_and_each_leaf(capsys):
    assert cli.main(["verify", example("mlp.py"), "--policy", "dots_saveable", "--format",
                     "json"]) == 0  # fmt: skip
    said = json.loads(capsys.readouterr().out)
    gradients = said["gradients"]
    assert said["schema"] == 1 and gradients["verdict"] in ("equal", "agree")
    assert {"verdict", "bitwise_leaves", "max_abs", "max_rel", "tolerance", "device"} <= set(
        gradients
    )
    assert [leaf["path"] for leaf in gradients["leaves"]][:3] == [
        "loss", "params[0][0]", "params[0][1]",
    ]  # fmt: skip


@pytest.mark.skipif(not HAS_LIBTPU, reason="needs the tpu extra (libtpu)")
def test_a_deviceless_topology_exits_2_and_claims_nothing(capsys):
    status = cli.main(["verify", example("mlp.py"), "--device", "tpu:v5e:2x2"])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    said = [line for line in err.splitlines() if line.startswith("remat-tui: error:")]
    assert len(said) == 1 and "deviceless TPU topology" in said[0]
    assert "nothing is claimed" in said[0] and "Traceback" not in err


@pytest.mark.parametrize(
    "args, cause",
    [
        (["--policy", "nothing_savable"], "unknown policy 'nothing_savable'"),
        (["--site", "nowhere"], "expected ID=SPEC or FUNCTION=SPEC"),
        (["--structure", "nested(0)"], "nested"),
    ],
)
def test_bad_input_exits_2_naming_the_cause(capsys, args, cause):
    status = cli.main(["verify", example("mlp.py"), *args])
    err = capsys.readouterr().err
    assert status == 2 and cause in err and "Traceback" not in err


def test_a_missing_file_exits_2(capsys):
    assert cli.main(["verify", "no_such_model.py"]) == 2
    assert "no_such_model.py" in capsys.readouterr().err


def test_suggest_verify_drops_an_answer_that_recomputes_the_callback(capsys):
    """Without --verify the smallest answer recomputes the noisy block; with
    it, every answer that does is dropped, said with the leaves that moved,
    and the answer is one whose gradients are the code as written's."""
    assert cli.main(["suggest", NOISY, "--budget", "1KiB", "--format", "json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["best"]["policy"] == "nothing_saveable" and plain["gradients"] is None
    assert cli.main(["suggest", NOISY, "--budget", "1KiB", "--verify", "--format", "json"]) == 0
    said = json.loads(capsys.readouterr().out)
    dropped = {f["configuration"]: f for f in said["verify_failed"]}
    assert "policy nothing_saveable" in dropped
    assert dropped["policy nothing_saveable"]["differing"] == ["params['W1']", "params['W2']"]
    assert said["best"]["policy"] not in {c.removeprefix("policy ") for c in dropped}
    assert said["gradients"]["verdict"] in ("equal", "agree") and said["exact"] is False
    assert cli.main(["suggest", NOISY, "--budget", "1KiB", "--verify"]) == 0
    out = capsys.readouterr().out
    assert (
        "verify: dropped nothing_saveable: its gradients differ from the code as written's "
        "(params['W1'] by" in out
    )
