"""The installed `remat-tui` command, run as a user runs it."""

import json
import os
import subprocess

import pytest
from conftest import example, jax_saved_residuals

from remat_tui.errors import RematError


def run(cmd, *args, cwd=None):
    env = dict(os.environ)
    return subprocess.run(
        [cmd, *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env
    )


def test_report_json_matches_jax(remat_tui_cmd, notebook_targets):
    proc = run(
        remat_tui_cmd,
        "report",
        example("notebook.py") + ":f",
        "--policy",
        "dots_saveable",
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    from remat_tui.core.setup.loading import resolve_arguments

    t = notebook_targets["f"]
    args, kwargs = resolve_arguments(t)
    want = jax_saved_residuals(t.fn, "dots_saveable", args, kwargs)
    assert [r["text"] for r in report["residuals"]] == want
    assert report["policy"]["spec"] == "dots_saveable"


def test_report_to_file(remat_tui_cmd, tmp_path):
    out = tmp_path / "mlp.html"
    proc = run(remat_tui_cmd, "report", example("mlp.py"), "--format", "html", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and str(out) in proc.stderr
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_report_to_a_fifo_reaches_its_reader(remat_tui_cmd, tmp_path):
    """`-o` on a FIFO writes into it (a rename would leave a regular file there
    and its reader with nothing), as `-o /dev/null` must leave the device."""
    import stat
    import threading

    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()), daemon=True)
    reader.start()
    try:
        proc = run(remat_tui_cmd, "report", example("mlp.py"), "--format", "md", "-o", str(fifo))
    finally:
        reader.join(timeout=60)
        if reader.is_alive():  # nothing was written to the FIFO: release its reader
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert proc.returncode == 0, proc.stderr
    assert received and received[0].startswith("#") and "saved residuals" in received[0].lower()
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_python_dash_m(tmp_path):
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "remat_tui", "--version"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout.startswith("remat-tui ")


BAD_FILES = {
    "syntax.py": "def f(:\n",
    "raises.py": "raise RuntimeError('no GPU configured')\n",
    "empty.py": "x = 1\n",
    "badargs.py": "import remat_tui\n@remat_tui.target(args=lambda: 1 / 0)\n"
    "def f(x):\n    return x\n",
    "ints.py": "import remat_tui, jax.numpy as jnp\n"
    "@remat_tui.target(args=lambda: (jnp.arange(3),))\ndef f(x):\n    return x * 2\n",
    "strout.py": "import remat_tui, jax.numpy as jnp\n"
    "@remat_tui.target(args=lambda: (jnp.ones(3),))\ndef f(x):\n    return 'hi'\n",
}


@pytest.mark.parametrize(
    "case,args,fragment",
    [
        ("missing", ["/no/such/model.py"], "no such file"),
        ("syntax", ["syntax.py"], "syntax error at line 1"),
        ("raises", ["raises.py"], "RuntimeError: no GPU configured"),
        ("empty", ["empty.py"], "registers no targets"),
        ("name", [example("mlp.py") + ":nope"], "no target named 'nope'"),
        ("badargs", ["badargs.py"], "ZeroDivisionError"),
        ("ints", ["ints.py"], "no argument is a floating-point array"),
        ("strout", ["strout.py"], "returned a str, not an array"),
        (
            "policy",
            [example("mlp.py"), "--policy", "sometimes_saveable"],
            "unknown policy 'sometimes_saveable'",
        ),
        (
            "spec",
            [example("mlp.py"), "--policy", "save_only_these_names(layer1)"],
            "expected a quoted name",
        ),
        ("device", [example("mlp.py"), "--device", "gpu:0"], "unknown device 'gpu:0'"),
        (
            "misspelt",
            [example("mlp.py"), "--policy", "dots_savable"],
            "unknown policy 'dots_savable'. Did you mean dots_saveable?",
        ),
        (
            "misspelt_site",
            [example("mlp.py"), "--site", "layer=save_only_these_nams('layer1')"],
            "Did you mean save_only_these_names('layer1')?",
        ),
    ],
)
def test_bad_input_exits_2_with_one_clear_message(remat_tui_cmd, tmp_path, case, args, fragment):
    for name, source in BAD_FILES.items():
        (tmp_path / name).write_text(source)
    proc = run(remat_tui_cmd, "report", *args, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert fragment in proc.stderr
    assert proc.stderr.startswith("remat-tui: error: ")
    assert "remat_tui/" not in proc.stderr and "site-packages" not in proc.stderr


def test_unknown_name_in_spec_warns(remat_tui_cmd):
    proc = run(
        remat_tui_cmd,
        "report",
        example("mlp.py"),
        "--policy",
        "save_only_these_names('layer9')",
        "--format",
        "json",
    )
    assert proc.returncode == 0
    assert "warning: the function defines no checkpoint_name 'layer9'" in proc.stderr


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["/no/such/model.py"], "no such file"),
        ([example("mlp.py"), "--policy", "save_only_these_names(1)"], "expected a quoted name"),
    ],
)
def test_app_mode_bad_input_exits_2_before_the_app_starts(remat_tui_cmd, args, fragment):
    proc = run(remat_tui_cmd, *args)
    assert proc.returncode == 2 and fragment in proc.stderr


def test_app_mode_accepts_a_policy_the_target_declares():
    from remat_tui.core.setup.policies import check_syntax

    # A bare name may be one the target declares: the app checks it after loading.
    assert check_syntax("save_a_and_dots") is None
    assert check_syntax("save_from_both_policies(dots_saveable, save_a_and_dots)") is None
    # What no target could declare fails before the app starts.
    with pytest.raises(RematError, match="takes no arguments"):
        check_syntax("save_a_and_dots(1)")


def without_root_override(cmd: list[str]) -> list[str]:
    """`cmd` run so that file permissions bind: as root, through setpriv with the
    capabilities that override them dropped (root ignores permission bits)."""
    import shutil

    if os.geteuid() != 0:
        return cmd
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a folder unwritable")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--", *cmd]


@pytest.mark.parametrize("case", ["missing folder", "unwritable folder", "read-only file"])
def test_report_that_cannot_be_written_exits_2(remat_tui_cmd, tmp_path, case):
    folder = tmp_path / "out"
    out = folder / "mlp.html"
    if case != "missing folder":
        folder.mkdir()
    if case == "read-only file":
        out.write_text("keep me")
        out.chmod(0o444)
    if case == "unwritable folder":
        folder.chmod(0o555)
    cmd = [remat_tui_cmd, "report", example("mlp.py"), "--format", "html", "-o", str(out)]
    try:
        proc = subprocess.run(
            without_root_override(cmd), capture_output=True, text=True, timeout=300
        )
    finally:
        if folder.exists():
            folder.chmod(0o755)
    assert proc.returncode == 2, proc.stderr
    want = {
        "missing folder": f"folder {folder} does not exist",
        "unwritable folder": f"no permission to write in folder {folder}",
        "read-only file": "the file is read-only",
    }[case]
    assert proc.stderr.endswith(f"remat-tui: error: cannot write {out}: {want}.\n")
    assert "Traceback" not in proc.stderr
    if case == "unwritable folder":
        assert os.listdir(folder) == []
    if case == "read-only file":
        assert os.listdir(folder) == ["mlp.html"] and out.read_text() == "keep me"
