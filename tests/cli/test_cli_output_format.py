"""`remat-tui report -o PATH` without --format: the extension picks the format."""

import json

import pytest
from conftest import example

from remat_tui.cli import main


@pytest.mark.parametrize(
    ("name", "starts"),
    [
        ("r.md", "# remat-tui report"),
        ("r.json", "{"),
        ("r.html", "<!DOCTYPE html>"),
        ("r.txt", "target"),
    ],
)
def test_output_extension_picks_the_format(tmp_path, capsys, name, starts):
    out = tmp_path / name
    assert main(["report", example("mlp.py"), "-o", str(out)]) == 0
    assert out.read_text().lstrip().startswith(starts)
    fmt = {"r.md": "md", "r.json": "json", "r.html": "html", "r.txt": "text"}[name]
    assert f"wrote {fmt} report" in capsys.readouterr().err


def test_an_explicit_format_wins_over_the_extension(tmp_path):
    out = tmp_path / "r.md"
    assert main(["report", example("mlp.py"), "--format", "json", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["schema"] == 1


CHATTY = """
import os
import jax.numpy as jnp
import remat_tui
from jax.ad_checkpoint import checkpoint_name

print("imported: hello from the target")
os.write(1, b"raw bytes on fd 1\\n")


def args():
    print("building arguments")
    return (jnp.ones((4, 4)), jnp.ones(4))


@remat_tui.target(args=args)
def loss(W, x):
    print("tracing")
    h = checkpoint_name(jnp.sin(W @ x), "h")
    return jnp.sum(jnp.cos(h))
"""

EVERY_SUBCOMMAND = {
    "report": [],
    "compare": [],
    "suggest": ["--budget", "1KiB"],
    "diff": ["--policy", "nothing_saveable", "--vs", "dots_saveable"],
}


@pytest.mark.parametrize("command", list(EVERY_SUBCOMMAND))
def test_every_subcommand_keeps_the_targets_prints_off_stdout(remat_tui_cmd, write_target, command):
    # Run as a user would, so raw writes to file descriptor 1 count too.
    import subprocess

    path = write_target(CHATTY)
    args = [remat_tui_cmd, command, path, "--format", "json", *EVERY_SUBCOMMAND[command]]
    proc = subprocess.run(args, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schema"] == 1
    assert "hello from the target" in proc.stderr and "raw bytes on fd 1" in proc.stderr


@pytest.mark.parametrize("command", list(EVERY_SUBCOMMAND))
def test_every_subcommand_takes_the_format_from_the_extension(tmp_path, capsys, command):
    out = tmp_path / "out.json"
    assert main([command, example("mlp.py"), "-o", str(out), *EVERY_SUBCOMMAND[command]]) == 0
    assert json.loads(out.read_text())["schema"] == 1
    assert f"wrote json {command} to" in capsys.readouterr().err
