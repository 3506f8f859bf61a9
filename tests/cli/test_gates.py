"""`remat-tui report --compiled` and the CI gates: --max-residual-bytes SIZE
and, with --compiled, --max-peak-bytes SIZE. Exit 0 under, 1 over (with a
message naming the excess), 2 for a bad size or a peak gate without
--compiled. examples/mlp.py compiles in under a second."""

import json
import math
import re
import subprocess

import pytest
from conftest import example, jax_saved_residuals

from remat_tui.cli import main
from remat_tui.core.units import human_bytes, parse_size

MLP = example("mlp.py")


def jax_saved_bytes(path) -> int:
    """The bytes of what JAX's own print_saved_residuals lists for the file's
    target, read from its lines (`f32[32,128] output of ...`)."""
    import jax.numpy as jnp

    from remat_tui.core.setup.loading import load_target, resolve_arguments

    target = load_target(path)
    args, kwargs = resolve_arguments(target)
    total = 0
    for line in jax_saved_residuals(target.fn, "as_written", args, kwargs):
        short, dims = re.match(r"(\w+)\[([\d,]*)\]", line).groups()
        kind = {"f": "float", "i": "int", "u": "uint", "bf": "bfloat"}[short.rstrip("0123456789")]
        itemsize = jnp.dtype(kind + short.lstrip("bfiu")).itemsize
        total += math.prod(int(d) for d in dims.split(",") if d) * itemsize
    return total


def run(capsys, *args):
    status = main(["report", MLP, *args])
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.mark.parametrize(
    "text, size",
    [
        ("512MiB", 512 * 2**20),
        ("2GiB", 2 * 2**30),
        ("1.5e9", 1_500_000_000),
        ("4096", 4096),
        ("1.5 GB", 1_500_000_000),
        ("64kib", 64 * 1024),
    ],
)
def test_sizes(text, size):
    assert parse_size(text) == size


def test_residual_gate_passes_under_and_fails_over(capsys):
    status, out, err = run(capsys, "--max-residual-bytes", "1GiB")
    assert status == 0 and "over budget" not in err and "saved residuals" in out
    status, out, err = run(capsys, "--max-residual-bytes", "100KiB")
    assert status == 1
    assert "saved residuals" in out  # the report is written before the verdict
    assert "over budget" in err and "mlp.py:loss under policy as_written" in err
    # What examples/mlp.py saves as written, by JAX's own list (it differs
    # between JAX releases: 0.11 saves one_minus_square where 0.10 saved tanh and sub).
    saved = jax_saved_bytes(MLP)
    over = saved - 102_400
    assert f"residual bytes on a device {human_bytes(saved)} ({saved:,} B) exceeds" in err
    assert f"--max-residual-bytes 100.0 KiB (102,400 B) by {human_bytes(over)} ({over:,} B)" in err


def test_peak_gate_needs_compiled(capsys):
    status, out, err = run(capsys, "--max-peak-bytes", "1GiB")
    assert status == 2 and out == ""
    assert err.startswith("remat-tui: error: --max-peak-bytes needs --compiled")


@pytest.mark.parametrize("option", ["--max-residual-bytes", "--max-peak-bytes"])
@pytest.mark.parametrize("size", ["12XB", "lots", "-5MiB", "1e"])
def test_a_bad_size_exits_2_before_analysing(capsys, option, size):
    status, out, err = run(capsys, "--compiled", f"{option}={size}")
    assert status == 2 and out == ""
    said = "a size cannot be negative" if size.startswith("-") else "expected"
    assert err.startswith(f"remat-tui: error: {option}: size {size!r}: {said}")
    assert "512MiB" in err


def test_compiled_report_leads_with_the_peak(capsys):
    status, out, err = run(
        capsys, "--compiled", "--policy", "nothing_saveable", "--max-peak-bytes", "2GiB"
    )
    assert status == 0, err
    head = out.split("saved residuals")[0]
    assert "peak " in head and "per device (compiled for cpu:0)" in head
    assert "saved by autodiff" in head and "The compiled peak is what XLA" in head
    status, out, err = run(
        capsys, "--compiled", "--policy", "nothing_saveable", "--max-peak-bytes", "10KiB"
    )
    assert status == 1
    assert "compiled peak per device" in err and "exceeds --max-peak-bytes 10.0 KiB" in err
    assert "under policy nothing_saveable" in err


def test_json_markdown_and_html_carry_the_compiled_numbers(capsys):
    status, out, _ = run(capsys, "--compiled", "--format", "json")
    assert status == 0
    d = json.loads(out)
    c = d["compiled"]
    assert c["device"] == "cpu:0" and c["peak_bytes"] > 0 and c["flops"] > 0
    assert c["peak_bytes"] == (
        c["argument_bytes"] + c["output_bytes"] + c["temp_bytes"] - c["alias_bytes"]
    )
    for fmt in ("md", "html"):
        status, out, _ = run(capsys, "--compiled", "--format", fmt)
        assert status == 0 and "Compiled: peak" in out and "saved by autodiff" in out
        assert "The compiled peak is what XLA" in out
    status, out, _ = run(capsys, "--format", "json")
    assert json.loads(out)["compiled"] is None
    status, out, _ = run(capsys, "--format", "md")
    assert "Compiled" not in out and "saved by autodiff" not in out


def test_the_console_script_exits_1_over_budget(remat_tui_cmd, tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [remat_tui_cmd, "report", MLP, "--max-residual-bytes", "1000", "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stderr
    assert "exceeds --max-residual-bytes 1000 B" in proc.stderr
    saved = jax_saved_bytes(MLP)
    assert json.loads(out.read_text())["totals"]["device_bytes"] == saved
