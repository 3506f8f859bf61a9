"""The core knows nothing of the terminal; the package root stays light."""

import subprocess
import sys


def modules_after(statement: str) -> set[str]:
    code = f"{statement}\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return {m.split(".")[0] for m in out.split()}


def test_core_imports_no_textual_or_rich():
    loaded = modules_after(
        "import remat_tui.core.analysis, remat_tui.core.loading, remat_tui.core.policies"
    )
    assert "jax" in loaded
    assert "textual" not in loaded and "rich" not in loaded


def test_package_root_imports_neither_jax_nor_textual():
    loaded = modules_after("import remat_tui, remat_tui.cli")
    assert "jax" not in loaded and "textual" not in loaded


def test_report_imports_no_textual():
    assert "textual" not in modules_after("import remat_tui.report")


def test_one_jax_private_touch_point():
    import pathlib

    import remat_tui

    root = pathlib.Path(remat_tui.__file__).parent
    users = sorted(
        str(p.relative_to(root)) for p in root.rglob("*.py") if "jax._src" in p.read_text()
    )
    assert users == ["core/jax_internals.py"]


def test_app_draws_its_first_frame_before_jax_is_imported():
    # The app imports jax only in its loading worker, so `remat-tui FILE` shows a
    # loading screen at once instead of a blank terminal for the import's seconds.
    loaded = modules_after("import remat_tui.app.main")
    assert "textual" in loaded and "jax" not in loaded
