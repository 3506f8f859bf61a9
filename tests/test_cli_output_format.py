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
