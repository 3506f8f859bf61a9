"""`remat-tui FILE --mesh AXIS=N,...` (Contract 17, issue 42): the app builds
the target's example over the mesh asked for, as the headless commands and
`analyze(..., mesh=...)` do, shows it beside the device, and traces and
compiles over it; a bad --mesh is one line and exit 2 before the app starts."""

import os
import subprocess
import sys

from conftest import ROOT, wait_for
from test_app import SIZE, settle

import remat_tui
from remat_tui.app.main import RematApp
from remat_tui.core.units import human_bytes

MODEL = os.path.join(ROOT, "tests", "zoo", "models", "mesh_model.py")
MESH = "data=4,model=1"  # the zoo model's own mesh is data=2,model=2


async def test_the_app_traces_and_compiles_over_the_mesh_asked_for():
    target = remat_tui.load_targets(MODEL)["loss"]
    headless = remat_tui.analyze(target, mesh=MESH, compiled=True)
    own = remat_tui.analyze(target)  # over the model's own 2 x 2 mesh
    want = headless.to_dict()["totals"]["device_bytes_per_device"]
    assert want != own.to_dict()["totals"]["device_bytes_per_device"]  # the mesh tells

    app = RematApp(MODEL, "loss", show_timings=False, mesh=MESH)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        title = str(app.query_one("#title").render())
        assert "cpu:0, mesh data=4,model=1" in title, title
        shown = app.loaded.shown.to_dict()
        assert shown["device"]["mesh"] == {"data": 4, "model": 1}
        assert shown["totals"]["device_bytes_per_device"] == want
        assert f"{human_bytes(want)}/device" in str(app.query_one("#status").render())
        await pilot.press("p")  # compiled in the app's child process, over the same mesh
        await wait_for(pilot, lambda: app.compiles.known, "the compile")
        (known,) = app.compiles.known.values()
        assert known.peak_bytes == headless.compiled.peak_bytes


def test_a_bad_mesh_is_one_line_and_exit_2_before_the_app_starts():
    out = subprocess.run(
        [sys.executable, "-m", "remat_tui", MODEL, "--mesh", "data=2,model"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert "'model' is not AXIS=SIZE" in line and "--mesh" in line


async def test_a_mesh_no_target_takes_fails_the_load_and_says_so(write_target):
    path = write_target(
        "import jax.numpy as jnp, remat_tui\n"
        "@remat_tui.target(args=lambda: (jnp.ones(4),))\n"
        "def f(x):\n    return jnp.sum(jnp.sin(x))\n"
    )
    app = RematApp(path, show_timings=False, mesh="data=4")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.loaded.target is None
        assert "no factory of the target takes a `mesh`" in (app.loaded.load_error or "")


def test_the_browsers_app_is_given_the_mesh_too():
    from remat_tui.web import app_command

    command = app_command(MODEL, "loss", "as_written", None, (), MESH)
    assert command.endswith(f"--mesh {MESH}"), command


async def test_the_headline_shows_the_estimates_collective_part():
    """Contract 17: on a mesh, the compiled headline gives the step-time
    estimate in its parts, the collectives' among them, as StepTime has it."""
    from remat_tui.app.state.status import estimate_parts
    from remat_tui.core.xla.compiled_analysis import estimated

    target = remat_tui.load_targets(MODEL)["loss"]
    time = remat_tui.analyze(target, compiled=True).to_dict()["time"]  # StepTime's
    assert time["collective_bytes"] > 0 and time["collective_seconds"] > 0

    app = RematApp(MODEL, "loss", show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.compiles.known, "the compile")
        await pilot.pause()
        (known,) = app.compiles.known.values()
        shown = estimated(app.loaded.shown, known)
        assert shown["collective_seconds"] == time["collective_seconds"]
        assert shown["collective_bytes"] == time["collective_bytes"]
        status = str(app.query_one("#status").render())
        words = estimate_parts(time)
        assert words in status, status
        # this tiny program's collectives take under a microsecond: said in ns, not "0 µs"
        assert time["collective_seconds"] < 1e-6
        seconds, sent = time["collective_seconds"] * 1e9, human_bytes(int(time["collective_bytes"]))
        assert f"collectives {seconds:.3g} ns for {sent}/device" in status, status


def test_one_device_headline_has_no_parts():
    from remat_tui.app.state.status import estimate_parts

    assert estimate_parts(None) is None
    assert estimate_parts({"collective_bytes": 0.0, "seconds": 1e-3}) is None
