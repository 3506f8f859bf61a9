"""The step-time estimate's host part is one device's (Contract 17, issue 42):
the offloaded bytes each device moves over its own host link, out and back,
not the global array sizes spread over the devices. On the zoo's mesh model
over a mesh with an axis the residuals are not split over, each device holds
half of every offloaded value, not a quarter; checked against JAX's avals
(`saved_residuals` of the same code, its checkpoints' policy set by hand),
each counted by what one device holds of it, on a deviceless TPU (XLA's CPU
compile has no host memory to offload to)."""

from __future__ import annotations

import math
import os

import jax
import pytest
from conftest import ROOT

import remat_tui
from remat_tui.core.setup import policies
from remat_tui.core.setup.devices import libtpu_installed
from remat_tui.core.xla.estimates import step_time

pytestmark = pytest.mark.skipif(not libtpu_installed(), reason="needs the tpu extra (libtpu)")

MODEL = os.path.join(ROOT, "tests", "zoo", "models", "mesh_model.py")
DEVICE = "tpu:v5e:2x2"
MESH = (("data", 2), ("model", 1), ("pipe", 2))  # 'hidden' is split over data only
OFFLOAD = (
    "save_and_offload_only_these_names(names_which_can_be_saved=[], "
    "names_which_can_be_offloaded=['hidden'], offload_src='device', "
    "offload_dst='pinned_host')"
)


def jax_host_bytes() -> tuple[int, int]:
    """(one device's, global) bytes JAX offloads, read off its own avals."""
    import mesh_model
    from jax._src.ad_checkpoint import saved_residuals

    policy = policies.build(policies.parse(OFFLOAD))
    fn = mesh_model.make_loss(lambda i: policy)
    sizes, names = tuple(n for _, n in MESH), tuple(a for a, _ in MESH)
    mesh = jax.make_mesh(sizes, names, devices=jax.devices()[:4])
    args = mesh_model.example_args(mesh=mesh)
    per_device = whole = 0
    with jax.set_mesh(mesh):
        saved = saved_residuals(fn, *args)
    for aval, _ in saved:
        if "host" not in str(getattr(aval, "memory_space", "")).lower():
            continue
        size = aval.dtype.itemsize
        whole += math.prod(aval.shape) * size
        per_device += math.prod(aval.sharding.shard_shape(aval.shape)) * size
    return per_device, whole


def test_the_host_part_is_one_devices_bytes_over_the_host_link():
    import sys

    sys.path.insert(0, os.path.dirname(MODEL))
    per_device, whole = jax_host_bytes()
    assert per_device and per_device != whole / 4  # the mesh tells the two apart

    target = remat_tui.load_targets(MODEL)["loss"]
    mesh = ",".join(f"{a}={n}" for a, n in MESH)
    a = remat_tui.analyze(target, device=DEVICE, mesh=mesh, sites={"mlp": OFFLOAD}, compiled=True)
    assert (a.totals.host_bytes, a.totals.global_host_bytes) == (per_device, whole)
    chip = step_time.chip_of(a.compiled.device)
    assert a.compiled.devices == 4
    want = 2 * per_device / chip.host_bandwidth  # out and back, over one device's link
    assert a.time["host_seconds"] == pytest.approx(want, rel=1e-12)

    # compare's row of the same configuration estimates the same
    (row,) = remat_tui.compare(
        target, policies=["as_written"], sites={"mlp": OFFLOAD}, compiled=True,
        device=DEVICE, mesh=mesh,
    ).rows  # fmt: skip
    assert row.time.host_seconds == pytest.approx(want, rel=1e-12)


def test_an_offload_is_judged_by_one_devices_bytes(monkeypatch):
    """compare's "offloading is slower than recomputing" weighs the bytes one
    device moves over its own host link (here a link slowed to 1 kB/s, so
    that the seconds show) against that device's share of the recompute."""
    import dataclasses
    import sys

    from remat_tui.core.units import human_bytes, human_seconds

    sys.path.insert(0, os.path.dirname(MODEL))
    per_device, _ = jax_host_bytes()
    slow = dataclasses.replace(step_time.chip_of(DEVICE), host_bandwidth=1e3)
    monkeypatch.setattr(step_time, "chip_of", lambda device: slow)
    target = remat_tui.load_targets(MODEL)["loss"]
    mesh = ",".join(f"{a}={n}" for a, n in MESH)
    (row,) = remat_tui.compare(
        target, policies=["as_written"], sites={"mlp": OFFLOAD}, device=DEVICE, mesh=mesh
    ).rows
    assert row.offload_slower
    trip = human_seconds(2 * per_device / slow.host_bandwidth)
    said = f"moving {human_bytes(per_device)}/device to host and back takes about {trip} a step"
    assert any(said in note for note in row.notes), row.notes
