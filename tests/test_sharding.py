"""Sharded residuals: per-device bytes beside global bytes, on the four CPU
devices conftest forces (explicit-sharding mesh, avals like f32[8@data,4])."""

import jax
import jax.numpy as jnp
import pytest
from conftest import jax_saved_residuals
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import remat_tui
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
    t = a.totals
    assert t.device_bytes_per_device == sum(
        r.bytes if r.bytes_per_device is None else r.bytes_per_device for r in a.residuals
    )
    assert t.device_bytes_per_device < t.device_bytes
    d = a.to_dict()
    assert d["totals"]["device_bytes_per_device"] == t.device_bytes_per_device
    assert {r["bytes_per_device"] for r in d["residuals"]} == {64, 32}
    assert "per device" in render(a, "text")


def test_unsharded_residuals_report_no_per_device_split():
    a = remat_tui.analyze(loss, args=(jnp.ones((4, 4)), jnp.ones((8, 4))))
    assert all(r.bytes_per_device is None for r in a.residuals)
    assert a.totals.device_bytes_per_device == a.totals.device_bytes
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
    from remat_tui.app.drawing import TABLE_COLUMNS, draw

    a = remat_tui.analyze(loss, args=sharded_args)
    bytes_column = TABLE_COLUMNS.index("bytes")
    cells = {row[1]: row[bytes_column] for row in draw(a).rows}
    assert cells["f32[8@data,4]"] == "128 B (32 B/dev)"
    assert cells["f32[4,4]"] == "64 B"


def test_a_topology_after_cpu0_is_traced_over_its_own_mesh():
    """The primal program is cached per argument shapes and shardings: the same
    target over the four CPU devices, then over a TPU topology's four chips (same
    shapes, traced on the same local device), with a site override."""
    from remat_tui.core import devices as devices_lib
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
