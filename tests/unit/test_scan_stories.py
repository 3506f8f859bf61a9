"""The compiled story of scanned and sharded models (issue 42, Contract 14):
each per-layer residual a scan stacks leaves the forward while loop in a
buffer the backward loop reads, and its story says `kept` in that buffer,
sharded or not (it said `removed` over a mesh: the jaxpr's avals are global,
the compiled values one device's); a `shard_map` body's residuals carry the
lines of the body's equations as JAX records them; and the story names at
least 90% of the residual bytes at the compiled peak on 4 CPU devices and
on a deviceless `tpu:v5e:2x2`.

Checked against JAX at test time: the hand-compiled HLO of
`jax.value_and_grad` (the while loops and the tuple elements passing
between them), and JAX's own `saved_residuals` of the shard_map'd body.
"""

import os
import re
import sys

import jax
import pytest
from conftest import ROOT, jax_saved_residuals

import remat_tui
from remat_tui.core import stories
from remat_tui.core.setup import devices as devices_lib

sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo", "models"))
import shard_map_block  # noqa: E402
import sharded_nnx_scan as nnx_model  # noqa: E402

CPUS = jax.devices("cpu")[:4]
DOTS = jax.checkpoint_policies.dots_saveable


def _nnx_target(mesh, **sizes):
    return remat_tui.Target(
        fn=nnx_model.make_loss(mesh, width=sizes.get("width", nnx_model.WIDTH)),
        name="loss",
        args=lambda devices=None: nnx_model.example_args(
            mesh if mesh is None else nnx_model.mesh_of(devices), **sizes
        ),
    )


def _shard_map_target(chips, batch, policy=DOTS):
    return remat_tui.Target(
        fn=shard_map_block.make_loss(policy, chips),
        name="loss",
        args=lambda devices=None: shard_map_block.example_args(devices, batch=batch),
    )


# ---- the fates of a scan's stacked residuals, against the HLO ------------------------


def _instructions(text: str) -> dict[str, tuple[str, str, list[str]]]:
    """name -> (its shape, opcode, operand names) of every instruction of an HLO module."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = (.+?) ([\w\-]+)\((.*)$", line)
        if m:
            name, shape, opcode, rest = m.groups()
            out[name] = (shape, opcode, re.findall(r"%([\w.\-]+)", rest.split("), ")[0]))
    return out


def _element(shape: str, k: int) -> str:
    """The k-th element of a tuple shape, `f32[4,2,16,96]` (layout dropped)."""
    parts = re.findall(r"(\w+\[[\d,]*\])", re.sub(r"/\*.*?\*/", "", shape))
    return parts[k]


def _reaches_another_loop(hlo: dict, loop: str, k: int) -> bool:
    """Whether tuple element k of the while loop `loop` flows (through
    get-tuple-element, tuples, copies, bitcasts) into another while loop."""
    users: dict[str, list[str]] = {}
    for name, (_, _, operands) in hlo.items():
        for operand in operands:
            users.setdefault(operand, []).append(name)
    todo = [
        n
        for n in users.get(loop, [])
        if hlo[n][1] == "get-tuple-element" and re.search(rf"\bindex={k}\b", _line_of[n])
    ]
    seen = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for user in users.get(name, []):
            if hlo[user][1] == "while" and user != loop:
                return True
            if hlo[user][1] in ("tuple", "copy", "bitcast", "copy-start", "copy-done"):
                todo.append(user)
    return False


_line_of: dict[str, str] = {}


def _hand_hlo(fn, args) -> dict:
    text = jax.jit(jax.value_and_grad(fn)).lower(*args).compile().as_text()
    _line_of.clear()
    for line in text.splitlines():
        m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = ", line)
        if m:
            _line_of[m.group(1)] = line
    return _instructions(text)


@pytest.mark.parametrize("sharded", [True, False], ids=["mesh", "one-device"])
def test_a_scans_stacked_residuals_are_kept_in_the_loops_output(sharded):
    """Every residual the scan stacks (one per layer) is `kept` in an output
    of the forward while loop; in the hand-compiled HLO that output has the
    layer axis first and one device's share of the residual's elements, and
    it flows into the backward while loop. Over the mesh they all said
    `removed`."""
    mesh = nnx_model.mesh_of(CPUS) if sharded else None
    a = remat_tui.analyze(_nnx_target(mesh), device="cpu" if sharded else "cpu:0", compiled=True)
    assert a.compiled.devices == (4 if sharded else 1)
    hlo = _hand_hlo(nnx_model.make_loss(mesh), nnx_model.example_args(mesh))
    stacked = [r for r in a.residuals if r.origin and r.origin.trip_count == nnx_model.LAYERS]
    assert len(stacked) >= 5 and any(r.origin.name == "attn" for r in stacked)
    for r in stacked:
        fate = r.story.xla
        assert fate is not None and fate.what == stories.KEPT, (r.text, fate)
        m = re.fullmatch(r"(while\.\d+)\{(\d+)\}", fate.buffer or "")
        assert m, (r.text, fate.buffer)
        loop, k = m.group(1), int(m.group(2))
        assert hlo[loop][1] == "while"
        dims = [int(d) for d in _element(hlo[loop][0], k).split("[")[1][:-1].split(",")]
        assert dims[0] == nnx_model.LAYERS, (r.text, dims)
        elements = 1
        for d in dims:
            elements *= d
        share = r.bytes // (elements * 4)  # f32
        assert share * elements * 4 == r.bytes and share in ((1, 2, 4) if sharded else (1,))
        assert _reaches_another_loop(hlo, loop, k), (r.text, fate.buffer)


def test_explicitly_sharded_residuals_are_kept_in_one_devices_share():
    """Under an Explicit mesh (avals like `f32[8@data,32@model]`) the named
    hidden values of the zoo's mesh model are kept, each in a buffer of the
    hand-compiled HLO holding one device's share of it (they said `removed`:
    `8@data` was read as no dimension at all)."""
    import mesh_model

    target = remat_tui.Target(
        fn=mesh_model.make_loss(),
        name="loss",
        args=lambda devices=None: mesh_model.example_args(devices),
    )
    a = remat_tui.analyze(target, device="cpu", compiled=True)
    hlo = _hand_hlo(mesh_model.make_loss(), mesh_model.example_args(CPUS))
    hidden = [r for r in a.residuals if r.name == "hidden"]
    assert len(hidden) == mesh_model.LAYERS
    for r in hidden:
        fate = r.story.xla
        assert fate is not None and fate.what == stories.KEPT, (r.text, fate)
        name, _, k = fate.buffer.partition("{")
        shape = hlo[name][0]
        shape = _element(shape, int(k[:-1])) if k else shape
        dims = [int(d) for d in shape.split("[")[1].split("]")[0].split(",")]
        elements = 1
        for d in dims:
            elements *= d
        assert r.bytes_per_device == elements * 4, (r.text, shape)


@pytest.mark.parametrize("sharded", [True, False], ids=["mesh", "one-device"])
def test_bf16_scan_residuals_are_kept_through_cpus_f32_copies(sharded):
    """CPU computes a bf16 program in f32 and converts back and forth (XLA's
    converts carry no JAX primitive): the stacked projections and the
    block's output leave the forward loop as f32 copies of the bf16 values,
    and are kept there (they said `removed`, their buffers named none); the
    attention's scores and `attn`, one dot_general's size and line each,
    are told apart by their buffers' dimensions."""
    import jax.numpy as jnp

    mesh = nnx_model.mesh_of(CPUS) if sharded else None
    target = remat_tui.Target(
        fn=nnx_model.make_loss(mesh, dtype=jnp.bfloat16),
        name="loss",
        args=lambda devices=None: nnx_model.example_args(
            mesh if mesh is None else nnx_model.mesh_of(devices), dtype=jnp.bfloat16
        ),
    )
    a = remat_tui.analyze(target, device="cpu" if sharded else "cpu:0", compiled=True)
    stacked = [r for r in a.residuals if r.origin and r.origin.trip_count == nnx_model.LAYERS]
    assert len([r for r in stacked if r.dtype == "bfloat16"]) >= 4
    for r in stacked:
        assert r.story.xla.what == stories.KEPT, (r.text, r.story.xla)
    buffers = [r.story.xla.buffer for r in stacked]
    assert len(set(buffers)) == len(buffers)
    assert (_named_share(a) or 0) >= 0.9


# ---- lines inside shard_map bodies -------------------------------------------------


def test_shard_map_residuals_carry_the_lines_of_the_bodys_equations():
    """JAX says `output of shard_map from ` (no line) for a residual made in
    a shard_map'd body; the body's own equations carry the user's lines,
    which `saved_residuals` gives for the same body under the same policy
    (its collective bound by vmap's axis name): each shard_map residual's
    origin is at one of them, with the primitive JAX names there."""
    fn = shard_map_block.make_loss(DOTS, CPUS)
    args = shard_map_block.example_args(CPUS)
    theirs = jax_saved_residuals(fn, "as_written", args, {})
    assert [t for t in theirs if "shard_map" in t]
    a = remat_tui.analyze(_shard_map_target(CPUS, shard_map_block.BATCH), device="cpu")
    body = jax.vmap(
        jax.checkpoint(shard_map_block.block, policy=DOTS), in_axes=(None, 0), axis_name="data"
    )
    w, x = args
    local = jax.ShapeDtypeStruct((len(CPUS), x.shape[0] // len(CPUS), x.shape[1]), x.dtype)
    w = {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in w.items()}
    jax_lines = {}
    for text in jax_saved_residuals(body, "as_written", (w, local), {}):
        m = re.search(r"output of (\w+) from .*?(\w+\.py):(\d+)", text)
        if m:
            jax_lines.setdefault(m.group(1), set()).add((m.group(2), int(m.group(3))))
    assert jax_lines, "JAX names no body equation"
    mapped = [r for r in a.residuals if r.kind == "output" and "shard_map" in r.text]
    assert mapped
    for r in mapped:
        source = r.origin.source
        assert source is not None, r.text
        where = (os.path.basename(source.file), source.line)
        assert where in jax_lines.get(r.origin.primitive, set()), (r.text, where, jax_lines)
        made = r.story.made
        assert made.frames and (os.path.basename(made.frames[0].file), made.frames[0].line) == where


# ---- the named share of residual bytes at the peak ---------------------------------


def _named_share(a) -> float | None:
    """The share of the residual bytes at the compiled peak (every memory's)
    whose buffer names a residual; None where the peak holds none."""
    memory = a.compiled.memory
    held = [
        b
        for space in [memory, *memory.get("other_spaces", [])]
        for b in space["at_peak"]
        if b["category"] == "residual"
    ]
    size = sum(b["bytes"] for b in held)
    return sum(b["bytes"] for b in held if b["residual"]) / size if size else None


def _shard_map_share(chips, device: str) -> float:
    """The shard_map block's named share under the first of dots_saveable and
    everything_saveable whose compiled peak holds residual bytes (JAX 0.12's
    CPU compile of the dots one peaks in the backward part, past them)."""
    for policy in (DOTS, jax.checkpoint_policies.everything_saveable):
        a = remat_tui.analyze(_shard_map_target(chips, 4096, policy), device=device, compiled=True)
        assert a.compiled.devices == 4
        share = _named_share(a)
        if share is not None:
            return share
    raise AssertionError("no residual bytes at the peak under either policy")


def test_the_story_names_the_residual_bytes_at_the_peak_on_cpu_devices():
    a = remat_tui.analyze(_nnx_target(nnx_model.mesh_of(CPUS)), device="cpu", compiled=True)
    assert a.compiled.devices == 4
    assert (_named_share(a) or 0) >= 0.9
    assert _shard_map_share(CPUS, "cpu") >= 0.9


def test_the_story_names_the_residual_bytes_at_the_peak_on_a_deviceless_tpu():
    from remat_tui.errors import RematError

    try:
        chips = devices_lib.device_set(devices_lib.resolve_device("tpu:v5e:2x2"))
    except RematError as exc:
        pytest.skip(f"no deviceless TPU here ({exc.message})")
    import jax.numpy as jnp

    for dtype in (jnp.float32, jnp.bfloat16):  # v5e keeps bf16's scores and attn alike
        sizes = {"batch": 16, "seq": 128, "width": 256, "dtype": dtype}
        nnx_target = remat_tui.Target(
            fn=nnx_model.make_loss(nnx_model.mesh_of(chips), width=256, dtype=dtype),
            name="loss",
            args=lambda devices=None, sizes=sizes: nnx_model.example_args(
                nnx_model.mesh_of(devices), **sizes
            ),
        )
        a = remat_tui.analyze(nnx_target, device="tpu:v5e:2x2", compiled=True)
        assert a.compiled.devices == 4
        stacked = [r for r in a.residuals if r.origin and r.origin.trip_count == nnx_model.LAYERS]
        assert all(r.story.xla.what == stories.KEPT for r in stacked), dtype
        assert (_named_share(a) or 0) >= 0.9, dtype
    assert _shard_map_share(chips, "tpu:v5e:2x2") >= 0.9
