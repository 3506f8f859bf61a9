"""`remat-tui check`, run as a user runs it in CI: --write saves a baseline,
--against passes (exit 0) on the unchanged target and fails (exit 1), naming
the residual, when the model is edited to save one more value; bad input is
exit 2 with a message naming the cause."""

import json
import subprocess

MODEL = """
import jax, jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
import remat_tui

SAVED = {saved!r}

def layer(x, w):
    return checkpoint_name(jnp.tanh(x @ w), "h")

def args():
    f32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.float32)
    return f32(16, 32), [f32(32, 32)] * 3

@remat_tui.target(args=args)
def loss(x, ws):
    def body(x):
        for w in ws:
            x = layer(x, w)
        return x
    policy = jax.checkpoint_policies.save_only_these_names(*SAVED)
    return jnp.sum(jax.checkpoint(body, policy=policy)(x))
"""


def _run(cmd, *args):
    return subprocess.run([cmd, *args], capture_output=True, text=True, timeout=300)


def test_check_passes_unchanged_and_fails_naming_the_residual_saved_anew(
    write_target, remat_tui_cmd, tmp_path
):
    path = write_target(MODEL.format(saved=()))
    baseline = str(tmp_path / "baseline.json")
    wrote = _run(remat_tui_cmd, "check", path, "--write", baseline)
    assert wrote.returncode == 0, wrote.stderr
    saved = json.load(open(baseline))
    assert saved["schema"] == 1 and saved["compiled"]["peak_bytes"] > 0
    assert saved["check"]["device"] and saved["check"]["policy"] == "as_written"

    same = _run(remat_tui_cmd, "check", path, "--against", baseline)
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.rstrip().endswith("unchanged")

    # The model edited to save one more value: the name 'h' at every layer.
    write_target(MODEL.format(saved=("h",)))
    changed = _run(remat_tui_cmd, "check", path, "--against", baseline, "--format", "json")
    assert changed.returncode == 1, changed.stdout + changed.stderr
    said = json.loads(changed.stdout)
    assert said["changed"] and not said["residuals"]["disappeared"]
    appeared = said["residuals"]["appeared"]
    assert appeared and all("named 'h'" in r and "layer at" in r for r in appeared)


def test_check_says_what_is_wrong_with_its_input(write_target, remat_tui_cmd, tmp_path):
    path = write_target(MODEL.format(saved=()))
    missing = _run(remat_tui_cmd, "check", path, "--against", str(tmp_path / "none.json"))
    assert missing.returncode == 2 and "no such baseline" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": 1}')
    wrong = _run(remat_tui_cmd, "check", path, "--against", str(bad))
    assert wrong.returncode == 2 and "not a remat-tui baseline" in wrong.stderr
    tolerance = _run(remat_tui_cmd, "check", path, "--against", str(bad), "--tolerance", "5")
    assert tolerance.returncode == 2 and "--tolerance" in tolerance.stderr
    neither = _run(remat_tui_cmd, "check", path)
    assert neither.returncode == 2 and "--against" in neither.stderr
