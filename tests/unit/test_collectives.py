"""The collective part of the step-time estimate (Contract 17): the
collectives of the compiled program, the bytes one device sends for them, and
their time over the chip's interconnect.

The model: a scan of FSDP layers, each layer's weight sharded over the data
axis and gathered in the layer (`reshard` to replicated, an equation of the
jaxpr, so the checkpoint policy decides whether the gathered weight is saved
or gathered again). Every figure is checked against the compiled program's
own text, counted here independently: a regex over its op lines and trip
counts read from its while loops.
"""

import re

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import remat_tui
from remat_tui.core.jaxcompat.collectives import count_collectives
from remat_tui.core.setup import devices as devices_lib

LAYERS, WIDTH, BATCH = 3, 64, 16


def fsdp_loss(policy, mesh):
    def layer(x, w):
        w = jax.sharding.reshard(w, NamedSharding(mesh, P()))  # the all-gather
        return jnp.tanh(x @ w), None

    def loss(ws, x):
        x, _ = jax.lax.scan(jax.checkpoint(layer, policy=policy), x, ws)
        return jnp.mean(x**2)

    return loss


def fsdp_args(mesh):
    def f32(shape, spec):
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))

    return f32((LAYERS, WIDTH, WIDTH), P(None, "data", None)), f32((BATCH, WIDTH), P("data", None))


def mesh_of(devices):
    return jax.sharding.Mesh(devices, ("data",), axis_types=(AxisType.Explicit,))


def compiled_text(policy, devices) -> str:
    mesh = mesh_of(devices)
    step = jax.jit(jax.value_and_grad(fsdp_loss(policy, mesh)))
    return step.lower(*fsdp_args(mesh)).compile().as_text()


# --- an independent count of the HLO's collectives ---------------------------

_LINE = re.compile(
    r"^\s*(?:ROOT )?%?([\w.\-]+) = (\S+|\(.*?\)) "
    r"(all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)(-start)?\("
)
_WIDTH = {"f32": 4, "bf16": 2, "f16": 2, "s32": 4, "u32": 4, "f64": 8, "pred": 1, "s8": 1}


def _size(shape_text: str) -> int:
    total = 0
    for dtype, dims in re.findall(r"(\w+)\[([\d,]*)\]", shape_text):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * _WIDTH[dtype]
    return total


def hand_count(text: str, group: int) -> dict:
    """{kind: (ops run per step, bytes of their operands, bytes one device
    sends)}: every collective in one group of `group` devices, a loop body's
    ops times the loop's trips (`known_trip_count`, else the condition's
    constant, counting from 0)."""
    shapes = dict(re.findall(r"%([\w.\-]+) = ((?:\([^=]*?\)|\S+)) ", text))
    body_of_loop = {}
    for line in text.splitlines():
        if " while(" in line:
            body = re.search(r"body=%?([\w.\-]+)", line).group(1)
            trips = re.search(r'known_trip_count":\{"n":"(\d+)"', line)
            if trips is None:
                condition = re.search(r"condition=%?([\w.\-]+)", line).group(1)
                block = text.split(f"\n%{condition} ", 1)[1].split("\n}", 1)[0]
                trips = re.search(r"constant\((\d+)\)", block)
            body_of_loop[body] = int(trips.group(1))
    counts: dict = {}
    computation = None
    for line in text.splitlines():
        if not line.startswith(" ") and line.rstrip().endswith("{"):
            computation = line.split()[1 if line.startswith("ENTRY") else 0].lstrip("%")
        m = _LINE.match(line)
        if not m:
            continue
        kind = m.group(3)
        operands = re.findall(
            r"%([\w.\-]+)", line.split(f"{kind}{m.group(4) or ''}(", 1)[1].split(")")[0]
        )
        operand = sum(_size(shapes[name]) for name in operands)
        runs = body_of_loop.get(computation, 1)
        factor = {
            "all-gather": group - 1,
            "reduce-scatter": (group - 1) / group,
            "all-reduce": 2 * (group - 1) / group,
            "all-to-all": (group - 1) / group,
            "collective-permute": 1,
        }[kind]
        n, b, s = counts.get(kind, (0, 0, 0.0))
        counts[kind] = (n + runs, b + runs * operand, s + runs * operand * factor)
    return counts


def as_counts(collectives) -> dict:
    return {k: (v.count, v.operand_bytes, v.sent_bytes) for k, v in collectives.kinds.items()}


# --- the tests ----------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 4])
def test_counted_bytes_equal_a_hand_count_of_the_hlo(n):
    text = compiled_text(jax.checkpoint_policies.nothing_saveable, jax.devices()[:n])
    counted = count_collectives(text, n)
    hand = hand_count(text, n)
    assert hand, "the FSDP program has collectives"
    assert as_counts(counted) == pytest.approx(hand)
    assert counted.sent_bytes == pytest.approx(sum(s for _, _, s in hand.values()))
    assert counted.exact
    # every layer's weight is gathered in the forward pass and again in the backward
    gathered = LAYERS * WIDTH * WIDTH * 4
    assert counted.kinds["all-gather"].operand_bytes * n >= 2 * gathered


def test_remat_gathers_the_weights_again():
    """nothing_saveable: the backward pass gathers each weight again;
    everything_saveable keeps the gathered weights and gathers them once."""
    devices = jax.devices()[:4]
    again = count_collectives(compiled_text(jax.checkpoint_policies.nothing_saveable, devices), 4)
    kept = count_collectives(compiled_text(jax.checkpoint_policies.everything_saveable, devices), 4)
    assert again.kinds["all-gather"].sent_bytes > kept.kinds["all-gather"].sent_bytes
    # each layer's weight, one gather fewer when it is kept: (N-1)/N of it per layer
    shard = WIDTH * WIDTH * 4 // 4
    assert again.kinds["all-gather"].sent_bytes - kept.kinds["all-gather"].sent_bytes == (
        LAYERS * 3 * shard
    )


def _time(n: int, device=None, devices=None) -> dict:
    devices = devices if devices is not None else jax.devices()[:n]
    mesh = mesh_of(devices[:n])
    loss = fsdp_loss(jax.checkpoint_policies.nothing_saveable, mesh)
    a = remat_tui.analyze(loss, args=fsdp_args(mesh), compiled=True, device=device)
    assert a.time is not None and a.compiled is not None
    return {**a.time, "collectives": a.compiled.collectives}


def test_the_collective_part_is_zero_on_one_device_and_grows_with_the_mesh():
    one, two, four = _time(1), _time(2), _time(4)
    assert one["collective_seconds"] == 0 and one["collective_bytes"] == 0
    assert 0 < two["collective_bytes"] < four["collective_bytes"]
    assert 0 < two["collective_seconds"] < four["collective_seconds"]
    # the part is the bytes over the chip's interconnect figure, and in the total
    rate = four["interconnect"]["bytes_per_second"]
    assert four["collective_seconds"] == pytest.approx(four["collective_bytes"] / rate)
    parts = (
        four["compute_seconds"] + four["transcendental_seconds"] + four["memory_seconds"]
        + four["host_seconds"] + four["collective_seconds"] + four["overhead_seconds"]
    )  # fmt: skip
    assert four["seconds"] == pytest.approx(parts)  # the CPU adds its parts
    assert "nominal" in four["interconnect"]["source"]
    assert four["collective_bytes"] == four["collectives"]["sent_bytes"]


def test_the_reports_show_the_collective_part():
    from remat_tui.core.xla.estimates.step_time import StepTime
    from remat_tui.report.compiled import estimate_words, rates_words

    def estimate(n: int) -> StepTime:  # the Analysis's JSON, as the record rows hold
        return StepTime(**{k: v for k, v in _time(n).items() if k != "collectives"})

    four = estimate(4)
    assert "collectives" in estimate_words(four) and "sent per device" in estimate_words(four)
    assert "collectives: nominal" in rates_words(four)
    assert "collectives" not in estimate_words(estimate(1))


def test_a_deviceless_tpu_shows_the_part_with_its_rates_source():
    if not devices_lib.libtpu_installed():
        pytest.skip("libtpu is not installed")
    chips = devices_lib.topology_devices("v5p:2x2x1")
    t = _time(4, device="tpu:v5p:2x2x1", devices=chips)
    assert t["chip"] == "tpu v5p"
    assert t["collective_bytes"] > 0
    assert t["interconnect"]["bytes_per_second"] == 1200e9 / 2
    assert "https://cloud.google.com/tpu/docs/v5p" in t["interconnect"]["source"]
    assert t["collective_seconds"] == pytest.approx(t["collective_bytes"] / 600e9)
    # TPU's HLO prints no trip count: read from the loops' conditions
    assert t["collectives"]["exact"]
    mesh = mesh_of(chips[:4])
    loss = fsdp_loss(jax.checkpoint_policies.nothing_saveable, mesh)
    text = jax.jit(jax.value_and_grad(loss)).lower(*fsdp_args(mesh)).compile().as_text()
    assert t["collectives"]["sent_bytes"] == pytest.approx(
        sum(s for _, _, s in hand_count(text, 4).values())
    )


def test_replica_groups_in_each_of_xlas_forms():
    from remat_tui.core.jaxcompat.collectives import group_size

    assert group_size("all-gather(%a), replica_groups=mesh['x'=4,'y'=2] {'x'}, dims", 8) == 4
    assert group_size("all-reduce(%a), replica_groups=mesh['x'=4,'y'=2] {'x','y'}", 8) == 8
    assert group_size("all-gather(%a), replica_groups=[2,4]<=[8], dimensions={0}", 8) == 4
    assert group_size("all-gather(%a), replica_groups={{0,1},{2,3}}, dimensions={0}", 4) == 2
    assert group_size("all-reduce(%a), replica_groups={}, to_apply=%add", 4) == 4


def test_a_saved_gathered_weight_says_recomputing_it_gathers_it_again():
    """everything_saveable saves each layer's gathered weight: its story
    says so, with one device's bytes of it (JAX's own residual list says
    which residual it is: the whole weight per device, not its shard)."""
    from jax._src.ad_checkpoint import saved_residuals

    from remat_tui.report.story import lines

    mesh = mesh_of(jax.devices()[:4])
    loss = fsdp_loss(jax.checkpoint_policies.everything_saveable, mesh)
    args = fsdp_args(mesh)
    a = remat_tui.analyze(loss, args=args)
    gathered = [r for r in a.residuals if r.story and r.story.made and r.story.made.gathered_bytes]
    assert len(gathered) == 1
    weight = WIDTH * WIDTH * 4  # one layer's weight, whole, on each device
    assert gathered[0].story.made.gathered_bytes == weight
    words = dict(lines(gathered[0], 0))["gathered"]
    assert "recomputing it gathers it again (16.0 KiB per device)" in words
    # JAX saves the replicated (gathered) weights, stacked over the layers
    jax_avals = [str(aval) for aval, _ in saved_residuals(loss, *args)]
    assert any(f"[{LAYERS},{WIDTH},{WIDTH}]" in a for a in jax_avals)
    # the shards are not gathered values; nothing_saveable saves no gathered value
    nothing = remat_tui.analyze(
        fsdp_loss(jax.checkpoint_policies.nothing_saveable, mesh), args=args
    )
    assert not [
        r for r in nothing.residuals if r.story and r.story.made and r.story.made.gathered_bytes
    ]


def test_every_interconnect_figure_cites_a_page_the_chip_cites():
    from remat_tui.core.xla.estimates import chips

    for chip in chips.CHIPS.values():
        if chip.interconnect_bandwidth is None:
            assert "not timed" in chip.interconnect()["source"]
            continue
        cited = re.search(r"\((https://[^)]+)\)", chip.interconnect_source)
        assert cited and cited.group(1) in chip.sources, chip.name
