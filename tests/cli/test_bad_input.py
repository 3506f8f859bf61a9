"""A corpus of bad input, through the installed `remat-tui report` and through
the app (Pilot, and a real terminal for what only a terminal shows).

In the CLI each case must exit 2 with one message that names the cause and
says what to do, and never print a traceback of remat-tui's own frames (a
traceback of the user's own frames is part of some messages). In the app the
error shows in place (#error), the app keeps running and the last good
analysis stays. Inputs that JAX can differentiate after all (complex numbers,
pytree outputs, a very large argument pytree, a file that prints) must work,
each checked against JAX's own print_saved_residuals.
"""

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import example, jax_saved_residuals, wait_for
from test_app import SIZE, marked_device, settle

import remat_tui
from remat_tui.app.main import RematApp
from remat_tui.core.setup.loading import resolve_arguments

TARGET = "import jax, jax.numpy as jnp, remat_tui\n"
SOURCES = {
    "empty.py": "",
    "syntax_error.py": "import remat_tui\n\ndef f(x:\n    return x\n",
    "import_raises.py": "import remat_tui\nimport no_such_module_for_remat_tui\n",
    "trace_raises.py": TARGET + "def check(x, w):\n"
    "    if x.shape != w.shape:\n"
    "        raise ValueError(f'widths {x.shape[0]} and {w.shape[0]} do not match')\n"
    "@remat_tui.target(args=lambda: (jnp.ones(3), jnp.ones(4)))\n"
    "def f(x, w):\n    check(x, w)\n    return jnp.sin(x)\n",
    "int_inputs.py": TARGET + "@remat_tui.target(args=lambda: (jnp.arange(3),))\n"
    "def f(x):\n    return x * 2\n",
    "bool_inputs.py": TARGET + "@remat_tui.target(args=lambda: (jnp.array([True, False]),))\n"
    "def f(x):\n    return ~x\n",
    "complex_inputs.py": TARGET + "@remat_tui.target(args=lambda: (jnp.ones(3, jnp.complex64),))\n"
    "def f(z):\n    return jnp.sin(z * z).real.sum()\n",
    "str_output.py": TARGET + "@remat_tui.target(args=lambda: (jnp.ones(3),))\n"
    "def f(x):\n    return 'done'\n",
    "pytree_output.py": TARGET + "@remat_tui.target(args=lambda: (jnp.ones(3),))\n"
    "def f(x):\n    return {'a': jnp.sin(x), 'b': [jnp.cos(x) * x, (jnp.tanh(x),)]}\n",
    "args_not_tuple.py": TARGET + "@remat_tui.target(args=lambda: 3.0)\n"
    "def f(x):\n    return jnp.sin(x)\n",
    # print() and a raw write to file descriptor 1, at import and while tracing;
    # the words are split in the source, which the app's source pane shows
    "prints.py": "import os, sys\nprint('hello from ' + 'import')\n"
    "sys.stdout.write('more ' + 'noise\\n')\nos.write(1, b'raw fd ' + b'noise\\n')\n"
    + TARGET
    + "@remat_tui.target(args=lambda: (jnp.ones(3),))\n"
    "def f(x):\n    print('tracing ' + 'now')\n    return jnp.sin(jnp.sin(x))\n",
    # 5,000 leaves; shape-only, so nothing is allocated
    "huge_pytree.py": TARGET + "N = 5000\n"
    "@remat_tui.target(args=lambda: ([jax.ShapeDtypeStruct((2,), jnp.float32)] * N,))\n"
    "def f(xs):\n    return sum(jnp.sin(x).sum() for x in xs[:40]) + jnp.stack(xs).sum()\n",
    "no_checkpoint.py": TARGET + "@remat_tui.target(args=lambda: (jnp.ones(3),))\n"
    "def f(x):\n    return jnp.sin(jnp.sin(x))\n",
    # tracing takes ~20 s; SLOW_MARK names a file created once tracing has begun
    "slow.py": "import os, time\n" + TARGET + "@remat_tui.target(args=lambda: (jnp.ones(3),))\n"
    "def f(x):\n    if os.environ.get('SLOW_MARK'):\n"
    "        open(os.environ['SLOW_MARK'], 'w').close()\n"
    "    for _ in range(400):\n        time.sleep(0.05)\n        x = jnp.sin(x)\n    return x\n",
}
SITES = f"{example('transformer.py')}:scanned_checkpointed"
MLP = example("mlp.py")


@pytest.fixture
def bad(tmp_path):
    """The corpus, written into a fresh folder."""
    for name, source in SOURCES.items():
        (tmp_path / name).write_text(source)
    return tmp_path


def report(cmd, *args, cwd=None, timeout=300):
    return subprocess.run(
        [cmd, "report", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def assert_none_of_our_frames(text: str) -> None:
    """A user's traceback may be shown (their own frames); ours never."""
    for ours in ("remat_tui/", "site-packages", "<frozen importlib", "/jax/_src/"):
        assert ours not in text, text


def jax_oracle(path: str, name: str = "f", spec: str = "as_written") -> list[str]:
    t = remat_tui.load_targets(path)[name]
    args, kwargs = resolve_arguments(t)
    said = jax_saved_residuals(t.fn, spec, args, kwargs, t.policies)
    return [line for line in said if line != "tracing now"]  # prints.py, tracing


# ---- the CLI: exit 2 and one message (the cause, then what to do) -----------------------

CLI_FAILURES = [
    # (id, arguments: file names are in the corpus folder, cause, what to do)
    ("missing file", ["no_such_model.py"], "no such file", "Give the path of a Python file"),
    ("empty file", ["empty.py"], "the file registers no targets", "Decorate a function"),
    ("syntax error", ["syntax_error.py"], "syntax error at line 3", "def f(x:"),
    (
        "import raises",
        ["import_raises.py"],
        "ModuleNotFoundError: No module named 'no_such_module_for_remat_tui'",
        'import_raises.py", line 2',
    ),
    (
        "target raises while tracing",
        ["trace_raises.py"],
        "tracing under policy as_written failed: ValueError: widths 3 and 4 do not match",
        'trace_raises.py", line 4, in check',
    ),
    (
        "integer inputs",
        ["int_inputs.py"],
        "no argument is a floating-point array (int32)",
        "Give at least one float input",
    ),
    (
        "boolean inputs",
        ["bool_inputs.py"],
        "no argument is a floating-point array (bool)",
        "Give at least one float input",
    ),
    (
        "non-array output",
        ["str_output.py"],
        "the function returned a str, not an array",
        "it must return arrays (or a pytree of arrays)",
    ),
    ("args not a tuple", ["args_not_tuple.py"], "args must be a tuple", "zero-argument callable"),
    (
        "unknown policy",
        [MLP, "--policy", "sometimes_saveable"],
        "unknown policy 'sometimes_saveable'",
        "expected one of as_written",
    ),
    (
        "malformed spec",
        [MLP, "--policy", "save_only_these_names('layer1'"],
        "'(' was never closed",
        "expected a policy, e.g. dots_saveable",
    ),
    (
        "unknown site id",
        [SITES, "--site", "9=nothing_saveable"],
        "no checkpoint site 9",
        "Give a site id or a function name",
    ),
    (
        "unknown site name",
        [SITES, "--site", "nosuch=nothing_saveable"],
        "no checkpoint site 'nosuch'",
        "Sites: 1 (block at transformer.py:",
    ),
    (
        "site of a function with no checkpoint",
        ["no_checkpoint.py", "--site", "1=nothing_saveable"],
        "This function applies no jax.checkpoint, so it has no sites",
        "use --policy for an outer checkpoint",
    ),
    (
        "malformed --site",
        [SITES, "--site", "=nothing_saveable"],
        "expected ID=SPEC or FUNCTION=SPEC",
        "e.g. --site block=nothing_saveable",
    ),
    ("unknown device", [MLP, "--device", "gpu:0"], "unknown device 'gpu:0'", "available: cpu:0"),
    (
        "device out of range",
        [MLP, "--device", "cpu:9"],
        "unknown device 'cpu:9'",
        "available: cpu:0, cpu:1, cpu:2, cpu:3",
    ),
]


@pytest.mark.parametrize(
    "args,cause,remedy", [c[1:] for c in CLI_FAILURES], ids=[c[0] for c in CLI_FAILURES]
)
def test_cli_bad_input_exits_2_naming_the_cause(remat_tui_cmd, bad, args, cause, remedy):
    proc = report(remat_tui_cmd, *args, cwd=bad)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert proc.stderr.startswith("remat-tui: error: ")
    assert cause in proc.stderr and remedy in proc.stderr, proc.stderr
    assert_none_of_our_frames(proc.stderr)


COMMAND_LINE_FAILURES = [
    (
        "mistyped command",
        ["sugest", MLP, "--budget", "1MiB"],
        "'sugest' is not a command, nor a file",
        "Did you mean `remat-tui suggest`?",
    ),
    (
        "no such command",
        ["nosuchcmd", MLP],
        "'nosuchcmd' is not a command, nor a file",
        "The commands are report, compare, suggest",
    ),
    (
        "negative budget",
        ["suggest", MLP, "--budget", "-5MiB"],
        "--budget: size '-5MiB': a size cannot be negative",
        "e.g. 512MiB",
    ),
    (
        "negative fit budget",
        ["fit", MLP, "--budget", "-1e9"],
        "--budget: size '-1e9': a size cannot be negative",
        "e.g. 512MiB",
    ),
]


@pytest.mark.parametrize(
    "args,cause,remedy",
    [c[1:] for c in COMMAND_LINE_FAILURES],
    ids=[c[0] for c in COMMAND_LINE_FAILURES],
)
def test_cli_bad_command_line_exits_2_naming_the_cause(remat_tui_cmd, bad, args, cause, remedy):
    """Words argparse would answer with its own ("unrecognized arguments",
    "expected one argument"): said as what they are, and what to do."""
    proc = subprocess.run([remat_tui_cmd, *args], capture_output=True, text=True, timeout=300,
                          cwd=bad)  # fmt: skip
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert proc.stderr.startswith("remat-tui: error: ") and proc.stderr.count("\n") == 1
    assert cause in proc.stderr and remedy in proc.stderr, proc.stderr


def unprivileged(cmd: list[str]) -> list[str]:
    """`cmd` so that permission bits bind: as root (CI), through setpriv with the
    capabilities that override them dropped."""
    import shutil

    if os.geteuid() != 0:
        return cmd
    if shutil.which("setpriv") is None:
        pytest.skip("root without setpriv: permission bits cannot be made to bind")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *cmd]


def test_cli_unreadable_file(remat_tui_cmd, bad):
    path = bad / "locked.py"
    path.write_text(SOURCES["no_checkpoint.py"])
    path.chmod(0o000)
    try:
        proc = subprocess.run(
            unprivileged([remat_tui_cmd, "report", str(path)]),
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        path.chmod(0o644)
    assert proc.returncode == 2, proc.stderr
    assert f"{path}: cannot read the file (Permission denied)" in proc.stderr
    assert "chmod u+r locked.py" in proc.stderr
    assert_none_of_our_frames(proc.stderr)


@pytest.mark.parametrize("name", ["complex_inputs.py", "pytree_output.py"])
def test_cli_inputs_jax_differentiates_work(remat_tui_cmd, bad, name):
    proc = report(remat_tui_cmd, name, "--format", "json", cwd=bad)
    assert proc.returncode == 0, proc.stderr
    texts = [r["text"] for r in json.loads(proc.stdout)["residuals"]]
    assert texts == jax_oracle(str(bad / name)) and texts


def test_cli_output_of_a_printing_target_stays_json(remat_tui_cmd, bad):
    proc = report(remat_tui_cmd, "prints.py", "--format", "json", cwd=bad)
    assert proc.returncode == 0, proc.stderr
    report_ = json.loads(proc.stdout)  # nothing the target printed is mixed in
    assert [r["text"] for r in report_["residuals"]] == jax_oracle(str(bad / "prints.py"))
    for said in ("hello from import", "more noise", "raw fd noise", "tracing now"):
        assert said in proc.stderr  # not lost: on stderr


def test_cli_huge_argument_pytree(remat_tui_cmd, bad):
    start = time.perf_counter()
    proc = report(remat_tui_cmd, "huge_pytree.py", "--format", "json", cwd=bad, timeout=180)
    took = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    texts = [r["text"] for r in json.loads(proc.stdout)["residuals"]]
    assert texts == jax_oracle(str(bad / "huge_pytree.py"))
    assert took < 120, took  # a sanity bound: ~3 s on a quiet 2-core machine


def test_cli_unknown_checkpoint_name_warns(remat_tui_cmd):
    proc = report(remat_tui_cmd, MLP, "--policy", "save_only_these_names('layer9')")
    assert proc.returncode == 0, proc.stderr
    assert "remat-tui: warning: the function defines no checkpoint_name 'layer9'" in proc.stderr
    assert "(names it defines: layer0, layer1, layer2)" in proc.stderr


def test_cli_output_over_an_existing_file(remat_tui_cmd, tmp_path):
    out = tmp_path / "mlp.json"
    out.write_text("old report")
    proc = report(remat_tui_cmd, MLP, "--format", "json", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["schema"] == 1
    assert os.listdir(tmp_path) == ["mlp.json"]  # no temporary file left behind


def test_cli_ctrl_c_during_a_trace_exits_130(remat_tui_cmd, bad):
    mark = bad / "tracing"
    # As from a terminal: ctrl+c's default action, even where these tests were
    # started as a background job (whose shell ignores SIGINT, and a child
    # inherits an ignored signal). Reset in a launcher that then execs the
    # command, not in preexec_fn: forking this multithreaded process to run
    # Python before exec can deadlock.
    launcher = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", launcher, remat_tui_cmd, "report", "slow.py"],
        cwd=bad,
        env={**os.environ, "SLOW_MARK": str(mark)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not mark.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)  # what the terminal sends for ctrl+c
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert out == "" and "Traceback" not in err


# ---- the app: the error in place, the app alive, the last good state kept -------------


def error_text(app) -> str:
    error = app.query_one("#error")
    return str(error.render()) if error.display else ""


def status_text(app) -> str:
    return str(app.query_one("#status").render())


def shown_texts(app) -> list[str]:
    return [r.text for r in app.loaded.shown.residuals]


APP_LOAD_FAILURES = [
    ("no_such_model.py", "no such file", "Not loaded"),
    ("empty.py", "the file registers no targets", "Not loaded"),
    ("syntax_error.py", "syntax error at line 3", "Not loaded"),
    ("import_raises.py", "ModuleNotFoundError: No module named", "Not loaded"),
    ("trace_raises.py", "ValueError: widths 3 and 4 do not match", "Nothing analysed"),
    ("int_inputs.py", "no argument is a floating-point array (int32)", "Nothing analysed"),
    ("bool_inputs.py", "no argument is a floating-point array (bool)", "Nothing analysed"),
    ("str_output.py", "the function returned a str, not an array", "Nothing analysed"),
    ("args_not_tuple.py", "args must be a tuple", "Nothing analysed"),
]


@pytest.mark.parametrize(
    "name,cause,status", APP_LOAD_FAILURES, ids=[c[0] for c in APP_LOAD_FAILURES]
)
async def test_app_bad_file_shows_the_error_in_place(bad, name, cause, status):
    app = RematApp(str(bad / name))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert cause in error_text(app)
        assert status in status_text(app)  # says what to do, no spinner left turning
        assert app.is_running and app.loaded.shown is None
        assert_none_of_our_frames(error_text(app))
        await pilot.press("2", "s", "n", "space", "r", "d", "escape", "e", "?", "escape")
        await pilot.pause()
        assert app.is_running and cause in error_text(app)


@pytest.mark.parametrize(
    "name", ["complex_inputs.py", "pytree_output.py", "prints.py", "huge_pytree.py"]
)
async def test_app_inputs_jax_differentiates_work(bad, name):
    app = RematApp(str(bad / name))
    async with app.run_test(size=SIZE) as pilot:
        start = time.perf_counter()
        await settle(app, pilot)
        assert time.perf_counter() - start < 120  # a sanity bound, for 5,000 leaves too
        assert app.loaded.shown is not None and not error_text(app)
        assert shown_texts(app) == jax_oracle(str(bad / name))
        await pilot.press("2")
        await settle(app, pilot)
        assert shown_texts(app) == jax_oracle(str(bad / name), spec="nothing_saveable")


async def test_app_unknown_policy_on_the_command_line_falls_back_and_says_so():
    app = RematApp(MLP, policy="sometimes_saveable")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.loaded.shown is not None and app.loaded.shown.policy == "as_written"
        said = error_text(app)
        assert "unknown policy 'sometimes_saveable'" in said and "Showing as_written" in said
        assert "residuals" in status_text(app)  # not a stale "importing" spinner
        await pilot.press("2")  # the next change clears it
        await settle(app, pilot)
        assert not error_text(app)


async def test_app_unknown_device_on_the_command_line_falls_back_and_says_so():
    app = RematApp(MLP, device="gpu:0")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert marked_device(app) == "cpu:0" and app.loaded.shown is not None
        said = error_text(app)
        assert "unknown device 'gpu:0'" in said and "Using cpu:0" in said


async def test_app_unknown_policy_typed_keeps_the_last_analysis():
    app = RematApp(MLP)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.loaded.shown
        app.asking.policy("nothing_savable")
        await pilot.pause()
        assert "unknown policy 'nothing_savable'" in error_text(app)
        assert "still showing the last good analysis" in error_text(app)
        assert app.loaded.shown is shown and app.is_running


async def test_app_name_policy_naming_an_undefined_name_warns():
    app = RematApp(MLP)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.asking.policy("save_only_these_names('layer1', 'layer7')")
        await settle(app, pilot)
        assert app.loaded.shown.policy == "save_only_these_names('layer1', 'layer7')"
        assert app.query_one("#error").has_class("-warning")
        assert "no checkpoint_name 'layer7'" in error_text(app)
        assert shown_texts(app) == jax_oracle(MLP, "loss", app.loaded.shown.policy)


@pytest.mark.parametrize(
    "site,cause",
    [(9, "no checkpoint site 9"), ("nosuch", "no checkpoint site 'nosuch'")],
)
async def test_app_unknown_site_keeps_the_last_analysis(site, cause):
    app = RematApp(example("transformer.py"), "scanned_checkpointed")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.loaded.shown
        app.asking.site(site, "nothing_saveable")
        await settle(app, pilot)
        assert cause in error_text(app) and "Sites: 1 (block" in error_text(app)
        assert app.loaded.shown is shown and app.is_running
        assert app.wanted.site_overrides == {}  # the request went back to what is shown


async def test_app_site_of_a_function_with_no_checkpoint(bad):
    app = RematApp(str(bad / "no_checkpoint.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.loaded.shown
        await pilot.press("s")  # no Sites list: a notice, nothing traced
        await pilot.pause()
        assert app.analyses.pending is None and app.loaded.shown is shown
        app.asking.site("f", "nothing_saveable")
        await settle(app, pilot)
        assert "no jax.checkpoint wraps it" in error_text(app)
        assert app.loaded.shown is shown and app.is_running


async def test_app_malformed_specs_in_the_palette():
    from remat_tui.app.commands import RematCommands

    app = RematApp(example("transformer.py"), "scanned_checkpointed")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.loaded.shown
        provider = RematCommands(app.screen)
        hits = [h async for h in provider.search("save_only_these_names('a', b)")]
        (bad_hit,) = [h for h in hits if "Not a policy" in str(h.match_display)]
        assert "expected a quoted name" in str(bad_hit.match_display)
        bad_hit.command()  # selecting it keeps the message on screen, changes nothing
        await pilot.pause()
        assert "expected a quoted name" in error_text(app) and app.loaded.shown is shown
        (site_hit,) = [h async for h in provider.search("site block: dots_saveable(")]
        assert "Not a site policy" in str(site_hit.prompt)
        assert app.loaded.shown is shown and app.analyses.pending is None and app.is_running


async def export_to(app, pilot, path: str) -> None:
    await pilot.press("e")
    await pilot.pause()
    app.screen.query_one("#path").value = path
    await pilot.click("#export")
    await pilot.pause()


@pytest.mark.parametrize("case", ["missing folder", "a file as folder", "a folder as file"])
async def test_app_export_that_cannot_be_written(tmp_path, case):
    from remat_tui.app.screens import ExportScreen

    (tmp_path / "notes.txt").write_text("")
    path = {
        "missing folder": tmp_path / "nope" / "r.html",
        "a file as folder": tmp_path / "notes.txt" / "r.html",
        "a folder as file": tmp_path,
    }[case]
    why = {
        "missing folder": f"folder {tmp_path / 'nope'} does not exist",
        "a file as folder": "notes.txt is a file, not a folder",
        "a folder as file": "it is a folder; give a file name",
    }[case]
    app = RematApp(MLP)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.loaded.shown
        await export_to(app, pilot, str(path))
        assert isinstance(app.screen, ExportScreen)  # open again, on the typed path
        said = str(app.screen.query_one("#export-error").render())
        assert f"cannot write {path}" in said and why in said
        assert app.screen.query_one("#path").value == str(path)
        await pilot.press("escape")
        assert app.loaded.shown is shown and app.is_running
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


async def test_app_export_into_an_unwritable_folder(tmp_path):
    if os.geteuid() == 0:
        pytest.skip(
            "root ignores permission bits and a capability cannot be dropped for one "
            "thread of this process; the CLI's test_report_that_cannot_be_written_exits_2 "
            "covers it through setpriv"
        )
    from remat_tui.app.screens import ExportScreen

    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    app = RematApp(MLP)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await export_to(app, pilot, str(folder / "r.html"))
            assert isinstance(app.screen, ExportScreen)
            said = str(app.screen.query_one("#export-error").render())
            assert f"no permission to write in folder {folder}" in said
    finally:
        folder.chmod(0o755)
    assert os.listdir(folder) == []


async def test_app_export_over_an_existing_file(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old")
    app = RematApp(MLP)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await export_to(app, pilot, str(out))
        assert app.screen is app.screen_stack[0]  # the dialog closed
    assert [r["text"] for r in json.loads(out.read_text())["residuals"]] == shown_texts(app)
    assert os.listdir(tmp_path) == ["r.json"]


def type_ahead(app, *keys: str) -> None:
    """Queue keys at once, as a terminal does when they are typed faster than the
    app handles them (Pilot.press waits for the app between keys)."""
    from textual import events

    for key in keys:
        event = events.Key(key, "\r" if key == "enter" else None)
        event.set_sender(app)
        app._driver.send_message(event)


async def test_app_enter_twice_in_dialogs_closes_each_once(tmp_path):
    """A second enter, typed before the first closed the dialog, must not close
    the screen beneath (Textual raises ScreenStackError: the app would crash)."""
    app = RematApp(MLP)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        type_ahead(app, "d", "down", "enter", "enter")
        await wait_for(pilot, lambda: marked_device(app) == "cpu:1", "the device the keys pick")
        await settle(app, pilot)  # the second enter, queued behind the first, handled too
        assert marked_device(app) == "cpu:1" and app.screen is app.screen_stack[0]
        await pilot.press("e")
        await pilot.pause()
        app.screen.query_one("#path").value = str(tmp_path / "r.md")
        type_ahead(app, "enter", "enter")
        await wait_for(pilot, (tmp_path / "r.md").exists, "the export the first enter asks")
        await pilot.pause()  # the second enter
        assert app.is_running and app.screen is app.screen_stack[0]
    assert (tmp_path / "r.md").read_text().startswith("# remat-tui report")


async def test_app_in_a_40x12_terminal():
    app = RematApp(example("transformer.py"), "scanned_checkpointed")
    async with app.run_test(size=(40, 12)) as pilot:
        await settle(app, pilot)
        # no error (the example's own saved GELU output gets a note: it spares no recompute)
        assert app.loaded.shown is not None and "error:" not in error_text(app)
        status = app.query_one("#status")
        assert status.region.height == 1 and status.region.bottom <= 12  # on screen
        assert "residuals" in status_text(app)
        for keys in (["2"], ["s", "space"], ["n", "down", "space"], ["r", "down"]):
            await pilot.press(*keys)
            await settle(app, pilot)
        for dialog in ("e", "?"):
            await pilot.press(dialog)
            await pilot.pause()
            assert app.screen is not app.screen_stack[0]
            await pilot.press("escape")
            await pilot.pause()
        await pilot.press("d")  # the Device list, in the sidebar shown for it
        await pilot.pause()
        assert app.focused.id == "devices" and app.focused.region.height > 0
        assert app.is_running and app.screen is app.screen_stack[0]
        assert app.loaded.shown.config == app.wanted.key(app.loaded.reloads)[1]


def held_trace(monkeypatch, policy: str) -> threading.Event:
    """Traces under `policy` wait for the returned event: a trace that runs as
    long as the test needs."""
    from remat_tui.core.trace import analysis

    real = analysis.analyze
    release = threading.Event()

    def analyze(target, config, **kwargs):
        if config.policy == policy:
            release.wait(60)
        return real(target, config=config, **kwargs)

    monkeypatch.setattr(analysis, "analyze", analyze)
    return release


async def test_app_resize_while_a_trace_runs(monkeypatch):
    release = held_trace(monkeypatch, "nothing_saveable")
    app = RematApp(MLP)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await pilot.press("2")
            for size in [(40, 12), (200, 60), (60, 20), SIZE]:
                await pilot.resize_terminal(*size)
                await pilot.pause()
                assert app.analyses.pending is not None and app.is_running  # still tracing
            release.set()
            await settle(app, pilot)
            assert app.loaded.shown.policy == "nothing_saveable"
            assert shown_texts(app) == jax_oracle(MLP, "loss", "nothing_saveable")
    finally:
        release.set()


@pytest.mark.parametrize("key", ["q", "ctrl+c"])
async def test_app_quit_during_a_trace(monkeypatch, key):
    release = held_trace(monkeypatch, "nothing_saveable")
    app = RematApp(MLP)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await pilot.press("2")
            await pilot.pause()
            assert app.analyses.pending is not None
            await pilot.press(key)
            await pilot.pause()
        assert not app.is_running and app.return_code in (0, None)
    finally:
        release.set()


# ---- the app in a real terminal: what only a terminal shows ---------------------------


def in_terminal(argv, *, cwd, keys=b"", wait_for=None, env=None, timeout=120):
    """Run `argv` on a pseudo-terminal (250x40: no message wraps); once
    `wait_for(output so far)` holds, type `keys`; return (exit status, seconds
    from the keys to the exit, all output)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 250, 0, 0))
    # The terminal's size is the pty's: not COLUMNS and LINES, which Textual
    # reads first and a pytest-xdist worker has set (to 80 and 24).
    inherited = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env={**inherited, **(env or {}), "TERM": "xterm-256color"},
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    out = bytearray()

    def drain(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    out.extend(os.read(master, 65536))
                except OSError:  # the app closed the terminal
                    return

    try:
        deadline = time.monotonic() + timeout
        while wait_for is not None and not wait_for(bytes(out)):
            assert time.monotonic() < deadline, bytes(out[-2000:])
            assert proc.poll() is None, bytes(out[-2000:])
            drain(0.1)
        drain(0.5)
        sent = time.monotonic()
        os.write(master, keys)
        while proc.poll() is None:
            assert time.monotonic() - sent < 60, "the app did not exit"
            drain(0.05)
        took = time.monotonic() - sent
        drain(0.2)
        return proc.returncode, took, bytes(out)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")
@pytest.mark.parametrize("key", [b"q", b"\x03"], ids=["q", "ctrl+c"])
def test_terminal_quit_during_a_trace_exits_at_once(remat_tui_cmd, bad, key):
    """Threads cannot be stopped: the process must not wait for the trace (20 s)."""
    mark = bad / "tracing"
    code, took, out = in_terminal(
        [remat_tui_cmd, "slow.py"],
        cwd=bad,
        keys=key,
        wait_for=lambda _: mark.exists(),
        env={"SLOW_MARK": str(mark)},
    )
    assert code == 0 and took < 10, (code, took)
    assert b"Traceback" not in out


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")
def test_terminal_target_that_prints_does_not_draw_over_the_app(remat_tui_cmd, bad):
    code, _, out = in_terminal(
        [remat_tui_cmd, "prints.py"], cwd=bad, keys=b"q", wait_for=lambda o: b"residuals" in o
    )
    assert code == 0
    for said in (b"hello from import", b"more noise", b"raw fd noise", b"tracing now"):
        assert said not in out
    # Silencing file descriptor 1 must not hide the terminal's size from Textual:
    # at the 80x24 fallback the status line is cut before "traced in".
    assert b"traced in" in out


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")
def test_terminal_unreadable_file(remat_tui_cmd, bad):
    path = bad / "locked.py"
    path.write_text(SOURCES["no_checkpoint.py"])
    path.chmod(0o000)
    try:
        code, _, out = in_terminal(
            unprivileged([remat_tui_cmd, str(path)]),
            cwd=bad,
            keys=b"q",
            wait_for=lambda o: b"Not loaded" in o,
        )
    finally:
        path.chmod(0o644)
    assert code == 2  # bad input, as in the CLI
    assert b"cannot read the file (Permission denied)" in out
    assert b"Traceback" not in out
