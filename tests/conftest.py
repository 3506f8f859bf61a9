"""Shared fixtures. Four CPU devices for device tests: XLA reads the flag when
jax first initialises, so it is set here, before any test imports jax."""

import contextlib
import io
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

# remat-tui's cache folder (the compile store, core/xla/compile/store.py, and
# the CPU's calibration, core/xla/estimates/calibration.py) is never the user's: the
# whole suite, and the commands it runs, keep theirs in a folder of the
# session's own. The compile store is off unless a test turns it on
# (`store_on`), so that a test that counts compiles is not answered by another's.
import tempfile  # noqa: E402

os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="remat-tui-test-cache-")
os.environ["REMAT_TUI_NO_CACHE"] = "1"
# Compiles in turn, here, unless a test asks for workers: what a test counts
# does not depend on which of two threads compiled a program first.
os.environ["REMAT_TUI_JOBS"] = "1"

import pytest

# With the tpu extra installed, importing core.setup.devices keeps libtpu quiet and
# unlocked on a machine without TPU chips (see _libtpu_without_chips there);
# it must happen before any test starts JAX's backends.
import remat_tui.core.setup.devices  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _programs_forgotten():
    """Each test starts knowing no compiled program, as it would in a process
    of its own (the same program compiled by an earlier test answers nothing)."""
    yield
    from remat_tui.core.xla.compile import service as compile_service

    compile_service.clear_memo()


@pytest.fixture
def store_on(tmp_path, monkeypatch):
    """The compile store on, in a folder of this test's own: the folder
    (XDG_CACHE_HOME, which the commands a test runs inherit)."""
    from remat_tui.core.xla.compile import service as compile_service

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("REMAT_TUI_NO_CACHE", "0")
    compile_service.use_store(None)
    return tmp_path / "cache"


def _snapshots_per_jax_line() -> None:
    """The app's snapshots draw JAX's own jaxpr text and residual wording, which
    change between JAX lines (0.11 prints `one_minus_square` where 0.10 saved
    `tanh` and `sub`): JAX 0.11 and newer keep theirs in
    tests/app/__snapshots_jax0.11__/, beside 0.10's tests/app/__snapshots__/."""
    import re
    from pathlib import Path

    import jax
    import pytest_textual_snapshot

    if tuple(int(p) for p in re.findall(r"\d+", jax.__version__)[:2]) < (0, 11):
        return
    extension = pytest_textual_snapshot.SVGImageExtension

    def dirname(cls, *, test_location) -> str:
        folder = Path(test_location.filepath).parent / "__snapshots_jax0.11__"
        return str(folder / test_location.basename)

    extension.dirname = classmethod(dirname)


_snapshots_per_jax_line()
EXAMPLES = os.path.join(ROOT, "examples")


def example(name: str) -> str:
    return os.path.join(EXAMPLES, name)


def jax_saved_residuals(fn, spec_text, args, kwargs, declared=None) -> list[str]:
    """What jax.ad_checkpoint.print_saved_residuals prints, captured now (the oracle)."""
    import jax
    import jax.ad_checkpoint  # a submodule: `import jax` alone does not load it

    from remat_tui.core.setup import policies

    spec = policies.parse(spec_text, declared)
    if spec.kind != policies.AS_WRITTEN:
        fn = jax.checkpoint(fn, policy=policies.build(spec, declared))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        jax.ad_checkpoint.print_saved_residuals(fn, *args, **kwargs)
    return buf.getvalue().splitlines()


def checkpoints_prevent_cse(fn, *args) -> list[bool]:
    """JAX's own record: the prevent_cse each checkpoint equation of `fn`'s
    traced program was bound with, in program order, outermost first (scan
    bodies included)."""
    import jax

    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if "prevent_cse" in eqn.params and "jaxpr" in eqn.params:  # a checkpoint
                found.append(bool(eqn.params["prevent_cse"]))
            for value in eqn.params.values():  # a body: a Jaxpr, or a ClosedJaxpr's
                if hasattr(value, "eqns") or hasattr(getattr(value, "jaxpr", None), "eqns"):
                    walk(getattr(value, "jaxpr", value))

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return found


@pytest.fixture(scope="session")
def notebook_targets():
    import remat_tui

    return remat_tui.load_targets(example("notebook.py"))


@pytest.fixture(scope="session")
def mlp_target():
    import remat_tui

    return remat_tui.load_targets(example("mlp.py"))["loss"]


@pytest.fixture
def write_target(tmp_path):
    """Write a target file and return its path."""

    def write(source: str, name: str = "target.py") -> str:
        path = tmp_path / name
        path.write_text(source)
        return str(path)

    return write


@pytest.fixture
def remat_tui_cmd():
    """The installed console script, as a user runs it."""
    exe = os.path.join(os.path.dirname(sys.executable), "remat-tui")
    if not os.path.exists(exe):
        pytest.fail(
            f"remat-tui is not installed next to {sys.executable}; "
            "install the package (pip install -e '.[test]')"
        )
    return exe


def local_devices_only(monkeypatch):
    """The Device list as a machine without the `tpu` extra shows it, so that
    snapshots are the same with and without libtpu installed."""
    from remat_tui.core.setup import devices

    monkeypatch.setattr(devices, "libtpu_installed", lambda: False)


async def wait_for(pilot, condition, what: str, timeout: float = 60.0, every: float = 0.02):
    """Wait for `condition()` (a worker's answer arrived, a message was handled,
    the screen stopped redrawing): checked every `every` seconds, the app's
    queued refreshes drawn in between, and a failure naming `what` once
    `timeout` seconds pass. Never a wait of a fixed time: it returns as soon
    as the condition holds, and a loaded machine only makes it wait longer."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await pilot.pause(every)  # the poll's interval: Pilot's sleep, then its redraw
