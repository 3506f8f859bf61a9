"""Deviceless TPU topologies in the app (issue 7): the `d` list offers them,
an analysis on one is traced on a CPU device and matches JAX's residual list,
a sharded target is built over the topology's chips, `p` compiles for the
chip, and a topology or compile that fails is said in place while the last
good analysis stays. Skipped with the reason when libtpu cannot load; only
tiny models are compiled."""

import math

import jax
import pytest
from conftest import example, jax_saved_residuals, wait_for
from test_app import SIZE, assert_shows_jax_residuals, marked_device, press_p_until_compiled, settle
from textual.widgets import OptionList

from remat_tui.app.main import RematApp
from remat_tui.core.setup import devices as devices_lib
from remat_tui.core.setup.loading import resolve_arguments
from remat_tui.core.units import human_bytes
from remat_tui.errors import RematError

TOPOLOGY = "tpu:v5e:2x2"

SHARDED = """
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

import remat_tui

SEEN = []  # the device sets the args factory was called with


def args(devices):
    SEEN.append(list(devices))
    mesh = jax.make_mesh((len(devices),), ("data",), devices=devices)
    return (
        jax.ShapeDtypeStruct((128, 128), jnp.float32, sharding=NamedSharding(mesh, P())),
        jax.ShapeDtypeStruct(
            (64, 128), jnp.float32, sharding=NamedSharding(mesh, P("data", None))
        ),
    )


@remat_tui.target(args=args)
def sharded(W, x):
    return jnp.sum(jnp.tanh(jnp.sin(x @ W) @ W))
"""

TOO_BIG = """
import jax
import jax.numpy as jnp

import remat_tui


@remat_tui.target(args=(jax.ShapeDtypeStruct((70000, 30000), jnp.float32),))
def big(x):  # traced in a moment (nothing is allocated); far more than a chip's HBM
    return jnp.sum(jnp.sin(x @ x.T) @ x)
"""


@pytest.fixture(scope="module")
def tpu():
    """A deviceless TPU topology, or a skip saying why there is none."""
    try:
        devices_lib.resolve_device(TOPOLOGY)
    except RematError as exc:
        pytest.skip(f"no deviceless TPU here ({exc.message})")
    return TOPOLOGY


def offered(app) -> list[str]:
    """The devices the Device list offers, in its order."""
    devices = app.query_one("#devices", OptionList)
    return [devices.get_option_at_index(i).id for i in range(devices.option_count)]


async def pick_device(app, pilot, label: str) -> None:
    """Choose `label` in the Device list (`d`) with the arrow keys, as a person would."""
    await pilot.press("d")
    devices = app.query_one("#devices", OptionList)
    assert app.focused is devices
    steps = offered(app).index(label) - devices.highlighted
    await pilot.press(*(["down"] * steps if steps > 0 else ["up"] * -steps), "enter")
    await settle(app, pilot)


async def wait_compiled(app, pilot, count: int) -> None:
    await wait_for(  # the compile runs in its own worker
        pilot,
        lambda: len(app.compiles.known) >= count and app.compiles.compiling is None,
        f"{count} compiles",
    )


def status(app) -> str:
    return str(app.query_one("#status").render())


def shown_key(app) -> tuple:
    return app.scene().key_of(app.loaded.shown)


async def test_d_offers_the_topologies_and_p_compiles_for_the_chip(tpu):
    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert offered(app) == devices_lib.available_devices()
        assert {f"tpu:{t}" for t in devices_lib.TOPOLOGIES} <= set(offered(app))
        await pilot.press("p")  # compiled on cpu:0 first: its numbers are the CPU's
        await settle(app, pilot)
        await wait_compiled(app, pilot, 1)
        cpu = app.compiles.known[shown_key(app)]
        await pick_device(app, pilot, tpu)
        assert marked_device(app) == tpu and app.loaded.shown.config.device == tpu
        assert app.loaded.shown.device["topology"] == tpu.removeprefix("tpu:")
        assert app.loaded.shown.device["chips"] == len(devices_lib.topology_devices("v5e:2x2"))
        assert_shows_jax_residuals(app, "as_written")  # traced on a CPU device, as JAX does
        assert tpu in str(app.query_one("#title").render())
        await wait_compiled(app, pilot, 2)
        chip = app.compiles.known[shown_key(app)]
        assert chip.device == tpu and chip.devices == 1  # unsharded: one chip
        # On TPU, HBM's peak over XLA's schedule; XLA's own peak counts every
        # memory at one moment (VMEM too), never less than HBM's alone.
        assert (chip.peak_source, cpu.peak_source) == ("live", "sum")
        assert chip.peak_bytes == chip.memory["peak_bytes"]
        assert chip.peak_bytes <= chip.backend_peak_bytes
        args, kwargs = resolve_arguments(app.loaded.target)
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        exact = sum(math.prod(x.shape) * x.dtype.itemsize for x in leaves)
        assert cpu.argument_bytes == exact  # the chip pads small arrays to its tiles
        assert exact <= chip.argument_bytes < 2 * exact
        assert f"peak {human_bytes(chip.peak_bytes)}/device (compiled, gradient alone)" in status(
            app
        )
        await pilot.press("2")  # another policy on the chip: traced and compiled too
        await settle(app, pilot)
        assert_shows_jax_residuals(app, "nothing_saveable")
        await wait_compiled(app, pilot, 3)
        assert app.compiles.known[shown_key(app)].device == tpu
        assert "(compiled, gradient alone)" in status(app)


async def test_a_sharded_target_is_built_over_the_topologys_chips(tpu, write_target):
    app = RematApp(write_target(SHARDED), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        seen = app.loaded.target.fn.__globals__["SEEN"]
        assert seen == [jax.devices("cpu")]  # cpu:0: the local devices
        await pick_device(app, pilot, tpu)
        chips = devices_lib.device_set(devices_lib.resolve_device(tpu))
        assert len(seen) == 2 and seen[-1] == chips  # built again, for this device set
        assert {d.platform for d in chips} == {"tpu"} and len(chips) == 4
        args, kwargs = resolve_arguments(app.loaded.target, chips)
        want = jax_saved_residuals(app.loaded.target.fn, "as_written", args, kwargs)
        calls = len(seen)  # the app's two builds, and this test's own
        a = app.loaded.shown
        assert [r.text for r in a.residuals] == want
        split = [r for r in a.residuals if "@data" in r.aval]
        assert split and all(r.bytes_per_device * len(chips) == r.bytes for r in split)
        per_device = sum(r.bytes_per_device or r.bytes for r in a.residuals)
        assert a.totals.device_bytes == per_device < a.totals.global_device_bytes
        whole = human_bytes(sum(r.bytes for r in a.residuals))
        assert f"{human_bytes(per_device)}/device ({whole} in global array sizes)" in status(app)
        await pilot.press("p")
        await settle(app, pilot)
        await wait_compiled(app, pilot, 1)
        c = app.compiles.known[shown_key(app)]
        assert c.device == tpu and c.devices == len(chips)  # over the topology's mesh
        shards = [math.prod(x.sharding.shard_shape(x.shape)) * x.dtype.itemsize for x in args]
        assert c.argument_bytes == sum(shards)
        assert f"peak {human_bytes(c.peak_bytes)}/device (compiled, gradient alone)" in status(app)
        await pick_device(app, pilot, "cpu:0")  # back: the earlier build, not another
        assert len(seen) == calls
        await wait_compiled(app, pilot, 2)
        assert app.compiles.known[shown_key(app)].device == "cpu:0"


async def test_a_topology_that_fails_keeps_the_last_good_state(tpu, monkeypatch):
    from jax.experimental import topologies

    def broken(*args, **kwargs):
        raise RuntimeError("UNAVAILABLE: libtpu could not describe the slice\ndetails")

    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        good = app.loaded.shown
        monkeypatch.setattr(devices_lib, "_topologies", {})  # as if never loaded
        monkeypatch.setattr(topologies, "get_topology_desc", broken)
        await pick_device(app, pilot, tpu)
        error = str(app.query_one("#error").render())
        assert app.query_one("#error").display
        assert "libtpu says: UNAVAILABLE: libtpu could not describe the slice" in error
        assert "Traceback" not in error and "still showing the last good analysis" in error
        assert (
            app.loaded.shown is good and marked_device(app) == "cpu:0"
        )  # the device went back too
        assert "cpu:0" in str(app.query_one("#title").render())
        await pilot.press("2")  # so the next policy is analysed on cpu:0, not refused
        await settle(app, pilot)
        assert (
            app.loaded.shown.policy == "nothing_saveable"
            and app.loaded.shown.config.device == "cpu:0"
        )
        assert not app.query_one("#error").display


async def test_a_compile_that_does_not_fit_the_chip_is_said_in_place(tpu, write_target):
    # Not fitting is an answer (Contract 8): the status line says so, with what
    # XLA needed, and no error is raised.
    app = RematApp(write_target(TOO_BIG), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pick_device(app, pilot, tpu)
        shown = app.loaded.shown
        assert shown.config.device == tpu
        await press_p_until_compiled(app, pilot)
        (result,) = app.compiles.known.values()
        assert not result.fits and result.needed_bytes
        assert f"does not fit {tpu}: needs {human_bytes(result.needed_bytes)}/device" in status(app)
        assert not app.query_one("#error").display
        assert app.loaded.shown is shown and app.compiles.compiling is None


async def test_a_topology_without_libtpu_falls_back_with_the_install_hint(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "libtpu", None)  # `import libtpu` raises ImportError
    monkeypatch.delenv("TPU_LIBRARY_PATH", raising=False)
    app = RematApp(example("mlp.py"), device=TOPOLOGY, show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert marked_device(app) == "cpu:0" and app.loaded.shown.config.device == "cpu:0"
        assert not any(d.startswith("tpu:") for d in app.loaded.devices)
        warning = str(app.query_one("#error").render())
        assert "pip install 'remat-tui[tpu]'" in warning and "Using cpu:0" in warning
        assert_shows_jax_residuals(app, "as_written")
