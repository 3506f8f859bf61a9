"""Sharded residuals: per-device bytes beside global bytes, on the four CPU
devices conftest forces (explicit-sharding mesh, avals like f32[8@data,4])."""

import re

import jax
import jax.numpy as jnp
import pytest
from conftest import jax_saved_residuals
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import remat_tui
from remat_tui.core.units import human_bytes
from remat_tui.report import render


def loss(W, x):
    return jnp.sum(jnp.sin(x @ W))


@pytest.fixture(scope="module")
def sharded_args():
    if len(jax.devices()) < 4:
        pytest.fail("conftest forces 4 CPU devices; XLA_FLAGS was overridden")
    mesh = jax.make_mesh((4,), ("data",), axis_types=(AxisType.Explicit,))
    x = jax.ShapeDtypeStruct((8, 4), jnp.float32, sharding=NamedSharding(mesh, P("data", None)))
    W = jax.ShapeDtypeStruct((4, 4), jnp.float32, sharding=NamedSharding(mesh, P()))
    return W, x


def test_sharded_residuals_have_per_device_bytes(sharded_args):
    a = remat_tui.analyze(loss, args=sharded_args)
    assert [r.text for r in a.residuals] == jax_saved_residuals(
        loss, "as_written", sharded_args, {}
    )
    by_aval = {r.aval: r for r in a.residuals}
    sharded = by_aval["f32[8@data,4]"]
    assert sharded.bytes == 8 * 4 * 4 and sharded.bytes_per_device == sharded.bytes // 4
    assert by_aval["f32[4,4]"].bytes_per_device is None  # replicated: all of it on each
    t = a.totals  # one device's (Contract 17), the global array sizes beside
    assert (
        t.device_bytes
        == t.device_bytes_per_device
        == sum(r.bytes if r.bytes_per_device is None else r.bytes_per_device for r in a.residuals)
    )
    assert t.device_bytes < t.global_device_bytes == sum(r.bytes for r in a.residuals)
    d = a.to_dict()
    assert d["totals"]["device_bytes_per_device"] == t.device_bytes
    assert {r["bytes_per_device"] for r in d["residuals"]} == {64, 32}
    assert "per device" in render(a, "text")


def test_unsharded_residuals_report_no_per_device_split():
    a = remat_tui.analyze(loss, args=(jnp.ones((4, 4)), jnp.ones((8, 4))))
    assert all(r.bytes_per_device is None for r in a.residuals)
    t = a.totals
    assert t.device_bytes_per_device == t.device_bytes == t.global_device_bytes
    assert "per device" not in render(a, "text")


def test_a_one_device_mesh_splits_nothing():
    mesh = jax.make_mesh(
        (1,), ("data",), axis_types=(AxisType.Explicit,), devices=jax.devices()[:1]
    )
    x = jax.ShapeDtypeStruct((8, 4), jnp.float32, sharding=NamedSharding(mesh, P("data", None)))
    W = jax.ShapeDtypeStruct((4, 4), jnp.float32, sharding=NamedSharding(mesh, P()))
    a = remat_tui.analyze(loss, args=(W, x))
    assert any("@data" in r.aval for r in a.residuals)  # the sharding is there...
    assert all(r.bytes_per_device is None for r in a.residuals)  # ...and splits nothing
    assert "per device" not in render(a, "text")


def test_app_table_shows_a_devices_share(sharded_args):
    from remat_tui.app.state.drawing import TABLE_COLUMNS, draw

    a = remat_tui.analyze(loss, args=sharded_args)
    bytes_column = TABLE_COLUMNS.index("bytes")
    cells = {row[1]: row[bytes_column] for row in draw(a).rows}
    split = next(r for r in a.residuals if r.aval == "f32[8@data,4]")
    # one device's share first (Contract 17), the global array size beside, called so
    want = f"{human_bytes(split.bytes_per_device)}/dev ({human_bytes(split.bytes)} global)"
    assert cells["f32[8@data,4]"] == want
    assert cells["f32[4,4]"] == "64 B"


def test_a_topology_after_cpu0_is_traced_over_its_own_mesh():
    """The primal program is cached per argument shapes and shardings: the same
    target over the four CPU devices, then over a TPU topology's four chips (same
    shapes, traced on the same local device), with a site override."""
    from remat_tui.core.setup import devices as devices_lib
    from remat_tui.errors import RematError

    try:
        devices_lib.resolve_device("tpu:v5e:2x2")
    except RematError as exc:
        pytest.skip(f"no deviceless TPU here ({exc.message})")

    def args(devices):
        mesh = jax.make_mesh((4,), ("data",), axis_types=(AxisType.Explicit,), devices=devices)
        x = jax.ShapeDtypeStruct((8, 4), jnp.float32, sharding=NamedSharding(mesh, P("data")))
        W = jax.ShapeDtypeStruct((4, 4), jnp.float32, sharding=NamedSharding(mesh, P()))
        return W, x

    def block(W, x):
        return jnp.sin(x @ W)

    def make(policy):
        return lambda W, x: jnp.sum(jax.checkpoint(block, policy=policy)(W, x))

    target = remat_tui.Target(fn=make(None), name="loss", args=args)
    hand = make(jax.checkpoint_policies.nothing_saveable)  # the site's policy edited in
    for device in ("cpu:0", "tpu:v5e:2x2"):
        a = remat_tui.analyze(target, sites={1: "nothing_saveable"}, device=device)
        chips = devices_lib.device_set(devices_lib.resolve_device(device))
        want = jax_saved_residuals(hand, "as_written", args(chips), {})
        assert [r.text for r in a.residuals] == want, device
        sharded = [r for r in a.residuals if r.bytes_per_device is not None]
        assert sharded and all(r.bytes_per_device * 4 == r.bytes for r in sharded)


# ---- whose bytes: per device, or across all devices (automatic sharding) ----------------
#
# Under an Explicit mesh the avals carry their sharding and each residual's
# share of a device is known; under an Auto mesh (the default of many
# programs) they carry none, while the compiled program still spans every
# device and its peak is one device's. Every figure shown beside a per-device
# one says which it is.


BYTES = re.compile(r"\d+(?:\.\d+)? (?:B|KiB|MiB|GiB|TiB)\b")

AUTO = """
import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import remat_tui


def make_args(devices):
    mesh = jax.make_mesh((4,), ("data",), axis_types=(AxisType.{axes},), devices=devices)
    x = jax.ShapeDtypeStruct((64, 32), jnp.float32, sharding=NamedSharding(mesh, P("data", None)))
    W = jax.ShapeDtypeStruct((32, 32), jnp.float32, sharding=NamedSharding(mesh, P()))
    return W, x


@remat_tui.target(args=make_args)
def loss(W, x):
    h = jnp.tanh(x @ W)
    return jnp.sum(jnp.sin(h @ W))
"""


def mesh_target(write_target, axes: str):
    return remat_tui.load_targets(write_target(AUTO.format(axes=axes), f"{axes.lower()}.py"))[
        "loss"
    ]


def unlabelled(text: str) -> list[str]:
    """The ` · `-separated parts of a status line or headline that show bytes
    without saying whose: neither per device nor in global array sizes."""
    return [
        part
        for part in text.split(" · ")
        if BYTES.search(part) and not re.search(r"/device|per device|global array size", part)
    ]


def test_status_labels_global_residual_bytes_beside_a_per_device_peak(write_target):
    """Auto-sharded: the peak is per device, the avals say nothing of how the
    residuals split: the residual figures are labelled global array sizes (they
    were a bare number beside `peak .../device`, then "across all 4 devices",
    which a global array size is not: a replicated array is held whole on each)."""
    from remat_tui.app.state.status import summary

    a = remat_tui.analyze(mesh_target(write_target, "Auto"), compiled=True)
    assert a.compiled.devices == 4 and not a.sharded
    t = a.totals
    head = "peak 24.0 KiB/device (compiled, gradient alone)"
    for devices in (4, None):
        line = summary(a, None, False, head, devices=devices)
        assert f"saved by autodiff in global array sizes: {human_bytes(t.device_bytes)}" in line
        assert "across all" not in line
        assert f"{human_bytes(t.bytes_excluding_arguments)} excluding arguments" in line
        assert not unlabelled(line), line
    plain = summary(a, None, False)  # no peak beside, the arguments over 4 devices all the same
    assert plain.startswith(f"{t.count} residuals · in global array sizes: ")


def test_status_gives_one_devices_bytes_when_the_avals_carry_them(write_target):
    from remat_tui.app.state.status import summary

    a = remat_tui.analyze(mesh_target(write_target, "Explicit"), compiled=True)
    assert a.sharded and a.compiled.devices == 4
    head = "peak 24.0 KiB/device (compiled, gradient alone)"
    line = summary(a, None, False, head, devices=4)
    per_device = sum(r.bytes_per_device or r.bytes for r in a.residuals)
    whole = sum(r.bytes for r in a.residuals)
    assert per_device < whole
    assert (
        f"{human_bytes(per_device)}/device saved by autodiff "
        f"({human_bytes(whole)} in global array sizes)"
    ) in line
    excluding = sum(r.device_share for r in a.residuals if r.kind != "argument")
    assert f"{human_bytes(excluding)}/device excluding arguments" in line
    assert not unlabelled(line), line
    line = summary(a, None, False)  # not compiled: one device's share first, the whole beside
    assert f"{human_bytes(per_device)}/device ({human_bytes(whole)} in global array sizes)" in line
    assert not unlabelled(line), line


def test_status_on_one_device_says_its_bytes_are_the_devices():
    from remat_tui.app.state.status import summary

    a = remat_tui.analyze(loss, args=(jnp.ones((4, 4)), jnp.ones((8, 4))))
    line = summary(a, None, False, "peak 1.0 KiB/device (compiled, gradient alone)", devices=1)
    assert f"{human_bytes(a.totals.device_bytes)}/device saved by autodiff" in line
    assert not unlabelled(line), line


async def test_app_status_line_labels_an_auto_sharded_targets_bytes(write_target):
    """The app itself, `p` pressed on an auto-sharded target over 4 CPU devices."""
    from test_app import SIZE, press_p_until_compiled, settle

    from remat_tui.app.main import RematApp

    app = RematApp(write_target(AUTO.format(axes="Auto")), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await press_p_until_compiled(app, pilot)
        c = app.compiles.known[app.scene().key_of(app.loaded.shown)]
        assert c.devices == 4
        status = str(app.query_one("#status").render())
        assert f"peak {human_bytes(c.peak_bytes)}/device" in status
        assert "saved by autodiff in global array sizes" in status
        assert not unlabelled(status), status


def test_reports_label_global_bytes_under_automatic_sharding(write_target):
    from remat_tui.report import compiled as compiled_report

    a = remat_tui.analyze(mesh_target(write_target, "Auto"), compiled=True)
    t = a.totals
    head = compiled_report.headline(a)
    global_sizes = f"{human_bytes(t.global_device_bytes)} in global array sizes"
    assert f"saved by autodiff {global_sizes}" in head
    assert not unlabelled(head), head
    details = dict(compiled_report.details(a))
    assert global_sizes in details["saved by autodiff (residuals)"]
    assert "temporaries per device" in details and "arguments per device" in details
    text = render(a, "text")
    summary_line = text.rstrip().splitlines()[-1]
    assert "global array sizes (per device unknown" in summary_line
    assert not unlabelled(summary_line)
    assert "bytes: global array size; per device unknown" in text
    md = render(a, "md")
    assert "Bytes: global array size; per device unknown" in md
    assert "Bytes: global array size; per device unknown" in render(a, "html")
    assert "across all" not in text + md


def test_reports_give_per_device_bytes_once_an_argument_is_sharded(write_target):
    from remat_tui.report import compiled as compiled_report

    a = remat_tui.analyze(mesh_target(write_target, "Explicit"), compiled=True)
    t = a.totals
    per_device = sum(r.bytes_per_device or r.bytes for r in a.residuals)
    whole = sum(r.bytes for r in a.residuals)
    assert t.device_bytes == per_device < whole == t.global_device_bytes
    head = compiled_report.headline(a)
    assert (
        f"saved by autodiff {human_bytes(per_device)} per device "
        f"({human_bytes(whole)} in global array sizes)"
    ) in head
    assert not unlabelled(head), head
    text = render(a, "text")
    assert (
        text.rstrip()
        .splitlines()[-1]
        .startswith(f"{t.count} residuals · per device: {human_bytes(per_device)} device")
    )
    split = next(r for r in a.residuals if r.bytes_per_device is not None)
    assert f"{human_bytes(split.bytes_per_device)}/device  {split.text}" in text
    md = render(a, "md")
    assert "| # | aval | global array size | per device | memory |" in md
    assert f"| {human_bytes(split.bytes)} | {human_bytes(split.bytes_per_device)} |" in md
    html = render(a, "html")
    assert "<th>global array size</th><th>per device</th>" in html


def test_compare_report_says_whose_bytes_each_column_counts(write_target):
    from remat_tui.core.search.compare import compare
    from remat_tui.report.comparisons import render_compare

    c = compare(
        mesh_target(write_target, "Auto"),
        policies=["as_written", "nothing_saveable"],
        compiled=True,
    )
    assert {r.compiled.devices for r in c.rows} == {4}
    for fmt in ("text", "md", "html"):
        out = render_compare(c, fmt)
        assert "device (global)" in out and "peak/device" in out and "temp/device" in out
        assert "global array sizes (per device unknown" in out
        assert "across all" not in out
    single = compare(loss, args=(jnp.ones((4, 4)), jnp.ones((8, 4))), policies=["as_written"])
    out = render_compare(single, "text")
    assert "(global)" not in out and "/device" not in out


def test_uncompiled_global_bytes_are_called_so_when_the_arguments_span_devices(write_target):
    """Automatic sharding, nothing compiled: the arguments are placed over 4
    devices and no aval says how the residuals split, so every residual
    figure is a global array size, and says so (compare's column was a bare
    `device`, suggest's budget "residual bytes per device")."""
    from remat_tui.app.state.status import summary
    from remat_tui.report.comparisons import render_compare
    from remat_tui.report.suggest import render_suggest

    target = mesh_target(write_target, "Auto")
    a = remat_tui.analyze(target)
    assert a.compiled is None and not a.sharded and a.auto_sharded_devices == 4
    assert (
        a.to_dict()["auto_sharded_devices"] == 4
    )  # the JSON's figures are global sizes, and say so
    t = a.totals
    assert t.device_bytes == t.global_device_bytes == sum(r.bytes for r in a.residuals)
    line = summary(a, None, False)
    assert f"in global array sizes: {human_bytes(t.device_bytes)}" in line, line
    assert not unlabelled(line), line
    assert "global array sizes (per device unknown" in render(a, "text").rstrip().splitlines()[-1]
    c = remat_tui.compare(target, policies=["as_written", "nothing_saveable"])
    out = render_compare(c, "text")
    assert "device (global)" in out and "global array sizes (per device unknown" in out
    s = remat_tui.suggest(target, t.device_bytes)
    said = render_suggest(s, "text")
    assert "(residual bytes in global array sizes; per device unknown" in said, said
    one = remat_tui.analyze(loss, args=(jnp.ones((4, 4)), jnp.ones((8, 4))))
    assert one.auto_sharded_devices == 1 and "global" not in summary(one, None, False)


def test_an_explicit_mesh_of_replicated_arguments_is_not_called_global():
    """Over a mesh of explicit axes the avals carry their sharding: a
    residual held whole on each device is one device's bytes, known, and no
    figure is called a global size of unknown split."""
    from remat_tui.app.state.status import summary

    mesh = jax.make_mesh((4,), ("data",), axis_types=(AxisType.Explicit,))
    whole = NamedSharding(mesh, P())
    x = jax.ShapeDtypeStruct((8, 4), jnp.float32, sharding=whole)
    W = jax.ShapeDtypeStruct((4, 4), jnp.float32, sharding=whole)
    a = remat_tui.analyze(loss, args=(W, x))
    assert not a.sharded and a.auto_sharded_devices == 1
    assert "global" not in summary(a, None, False) + render(a, "text")
