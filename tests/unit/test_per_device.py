"""Per device, always (Contract 17; issue 42, Wanted 2): every budget,
residual total and label is one device's unless it says in words that it is
not ("global array size"). On the zoo's mesh model (a 2 x 2 explicit mesh
over the four CPU devices conftest forces), against JAX at test time: the
avals `jax._src.ad_checkpoint.saved_residuals` gives, each counted by what
one device holds of it (its sharding's shard shape) and by its global size.
"""

from __future__ import annotations

import math
import os

import jax
import pytest
from conftest import ROOT

import remat_tui
from remat_tui.core.setup import policies
from remat_tui.core.setup.loading import resolve_arguments
from remat_tui.core.units import human_bytes

MODEL = os.path.join(ROOT, "tests", "zoo", "models", "mesh_model.py")
POLICIES = ["as_written", "nothing_saveable", "everything_saveable"]


@pytest.fixture(scope="module")
def target():
    if len(jax.devices()) < 4:
        pytest.fail("conftest forces 4 CPU devices; XLA_FLAGS was overridden")
    return remat_tui.load_targets(MODEL)["loss"]


def jax_bytes(target, spec: str) -> tuple[int, int]:
    """(one device's, global) bytes of what JAX saves under `spec` (an
    outer policy, as compare applies it), read off JAX's own avals."""
    from jax._src.ad_checkpoint import saved_residuals

    fn = target.fn
    if spec != "as_written":
        fn = jax.checkpoint(fn, policy=policies.build(policies.parse(spec)))
    args, kwargs = resolve_arguments(target)
    # Traced under the arguments' mesh, as a user runs a model of explicit
    # axes (and as remat-tui traces it): JAX 0.12 shards some residuals only
    # there (the layers' hidden f32[8,32] is f32[8@data,32@model] under it).
    (mesh,) = {leaf.sharding.mesh for leaf in jax.tree.leaves((args, kwargs))}
    per_device = whole = 0
    with jax.set_mesh(mesh):
        saved = saved_residuals(fn, *args, **kwargs)
    for aval, _ in saved:
        size = aval.dtype.itemsize
        whole += math.prod(aval.shape) * size
        sharding = getattr(aval, "sharding", None)
        shard = sharding.shard_shape(aval.shape) if sharding is not None else aval.shape
        per_device += math.prod(shard) * size
    assert per_device < whole, "the mesh model's residuals should be split"
    return per_device, whole


def test_the_totals_and_the_json_are_one_devices(target):
    a = remat_tui.analyze(target)
    per_device, whole = jax_bytes(target, "as_written")
    t = a.totals
    assert (t.device_bytes, t.global_device_bytes) == (per_device, whole)
    d = a.to_dict()
    assert d["totals"]["device_bytes"] == d["totals"]["bytes"] == per_device
    assert d["totals"]["global_device_bytes"] == d["totals"]["global_bytes"] == whole
    assert sum(r["bytes"] for r in d["residuals"]) == per_device
    assert sum(r["global_bytes"] for r in d["residuals"]) == whole


def test_compare_rows_and_columns_are_one_devices(target):
    from remat_tui.core.search.compare import compare
    from remat_tui.report.comparisons import render_compare

    c = compare(target, policies=POLICIES)
    for row in c.rows:
        per_device, whole = jax_bytes(target, row.config.policy)
        assert (row.device_bytes, row.weighed_bytes) == (per_device, per_device)
        d = row.to_dict()
        assert (d["device_bytes"], d["global_device_bytes"]) == (per_device, whole)
    text = render_compare(c, "text")
    assert "device/device" in text and "(all devices)" not in text
    for row in c.rows:  # each row's cell is its per-device figure
        line = next(ln for ln in text.splitlines() if row.config.policy in ln)
        assert line.split()[1:3] == human_bytes(row.device_bytes).split()
    assert "global_device_bytes" in text  # the legend says where the global sizes are


def test_a_budget_between_per_device_and_global_bytes_decides_by_per_device(target):
    """Saving everything recomputes nothing; a budget of those residuals'
    per-device bytes, below their global ones, fits it (the layers called
    directly, or everything_saveable: the same residuals), and every figure
    said is one device's."""
    from remat_tui.report.suggest import render_suggest

    per_device, whole = jax_bytes(target, "everything_saveable")
    s = remat_tui.suggest(target, per_device)
    best = s.best
    assert s.fits and best.recompute_flops == 0
    assert best.device_bytes == best.weighed_bytes == per_device < whole
    assert best.global_device_bytes == s.to_dict()["best"]["global_device_bytes"] == whole
    text = render_suggest(s, "text")
    assert f"uses {human_bytes(per_device)} (residual bytes per device)" in text
    assert human_bytes(whole) not in text
    assert remat_tui.suggest(target, per_device - 1).best.recompute_flops > 0


def test_diff_entries_are_one_devices(target):
    d = remat_tui.diff(target, "nothing_saveable", "everything_saveable")
    per_device = {"nothing_saveable": 0, "everything_saveable": 0}
    for spec in per_device:
        per_device[spec] = jax_bytes(target, spec)[0]
    assert d.bytes_delta == per_device["everything_saveable"] - per_device["nothing_saveable"]
    entries = d.only_a + d.only_b + d.both
    assert any(e["bytes"] < e["global_bytes"] for e in entries)


def test_notebook_displays_give_one_devices_totals(target):
    from rich.console import Console

    from remat_tui.notebook.compare_html import table

    a = remat_tui.analyze(target)
    per_device, whole = jax_bytes(target, "as_written")
    console = Console(record=True, width=200)
    console.print(a)
    out = console.export_text()
    said = f"per device: {human_bytes(per_device)} on device"
    assert said in out and f"global array sizes: {human_bytes(whole)} on device" in out
    html = a._repr_html_()
    assert said in html and "<th" in html and "global array size" in html
    rows = remat_tui.compare(target, policies=POLICIES).rows
    assert "device/device" in table(rows)
