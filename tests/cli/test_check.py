"""`remat-tui check`, run as a user runs it in CI: --write saves a baseline,
--against passes (exit 0) on the unchanged target and fails (exit 1), naming
the residual, when the model is edited to save one more value; bad input is
exit 2 with a message naming the cause."""

import json
import re
import subprocess
from collections import Counter

from conftest import jax_saved_residuals

import remat_tui
from remat_tui.core.setup.loading import resolve_arguments

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


# q, k and v on three lines of one checkpointed block, run twice: the policy
# written at the site is the factory's argument.
QKV = """
import jax, jax.numpy as jnp
import remat_tui

def attention(x, wq, wk, wv):
    q = jnp.tanh(x @ wq)
    k = jnp.tanh(x @ wk)
    v = jnp.tanh(x @ wv)
    return jax.nn.softmax(q @ k.T) @ v

def args():
    f32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.float32)
    return f32(16, 32), [f32(32, 32)] * 3

@remat_tui.target(args=args)
def loss(x, ws):
    block = jax.checkpoint(attention, policy=jax.checkpoint_policies.{policy})
    for _ in range(2):
        x = block(x, *ws)
    return jnp.sum(x)
"""


def _jax_outputs(path) -> Counter:
    """(primitive, line) of each output print_saved_residuals lists for the
    target in `path`: JAX's own, the oracle."""
    target = remat_tui.load_targets(path)["loss"]
    args, kwargs = resolve_arguments(target)
    said = jax_saved_residuals(target.fn, "as_written", args, kwargs)
    return Counter(
        (m[1], int(m[2]))
        for line in said
        if (m := re.search(r"output of (\w+) from .*:(\d+):\d+ \(attention\)", line))
    )


def test_check_says_each_residual_at_its_own_line_grouped_after_the_policy_that_changed(
    write_target, remat_tui_cmd, tmp_path
):
    path = write_target(QKV.format(policy="nothing_saveable"))
    baseline = str(tmp_path / "baseline.json")
    assert _run(remat_tui_cmd, "check", path, "--write", baseline).returncode == 0
    before = _jax_outputs(path)
    write_target(QKV.format(policy="everything_saveable"))
    after = _jax_outputs(path)

    said = _run(remat_tui_cmd, "check", path, "--against", baseline, "--format", "json")
    assert said.returncode == 1, said.stdout + said.stderr
    report = json.loads(said.stdout)
    appeared = Counter(
        (m[1], int(m[2]))
        for words in report["residuals"]["appeared"]
        if (m := re.search(r"\] (\w+) in attention at target\.py:(\d+)$", words))
    )
    # Each residual at its own line, as JAX says: q, k and v's at lines 6, 7
    # and 8 (which of tanh and its derivative JAX saves for each is its own).
    assert appeared == after - before
    assert {line for (primitive, line) in appeared} >= {6, 7, 8}
    assert report["causes"] == [
        "sites 1, 2 (attention at target.py:19): the policy was nothing_saveable in the "
        "baseline, everything_saveable now"
    ]

    text = _run(remat_tui_cmd, "check", path, "--against", baseline).stdout.splitlines()
    # The cause first, then the residuals grouped: one line per line, name and
    # kind, with its count and bytes.
    assert text[2].startswith("  because sites 1, 2 (attention")
    total = sum(appeared.values())
    assert text[3].startswith(f"  + saved now, not in the baseline: {total} residuals, ")
    grouped = [
        ((m[2], int(m[3])), int(m[1]))
        for t in text
        if (m := re.match(r"      (\d+) × \S+ (\w+) in attention at target\.py:(\d+) \(", t))
    ]
    assert dict(grouped) == appeared and len(grouped) == len(appeared)
    tanh_lines = [t for t in text if "f32[16,32] tanh in attention" in t]
    assert tanh_lines and all(t.strip().startswith("2 × ") for t in tanh_lines)
    assert all(t.endswith(" (4.0 KiB)") for t in tanh_lines)  # 2 × 16 × 32 × 4 B
    peak = next(t for t in text if t.startswith("  peak "))
    assert "exceeded the tolerance of 1.0%" in peak
