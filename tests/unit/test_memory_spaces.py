"""One memory at a time on TPU (Contract 7's memory spaces): the peak checked
against a budget is HBM's; VMEM, SMEM and host memory stand beside it, each at
its own peak with its buffers. Checked on a deviceless v5e compile against
JAX's own compile of the same program, at test time."""

import json
import re
import subprocess

import jax
import jax.numpy as jnp
import pytest
from conftest import ROOT

from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import resolve_device
from remat_tui.core.xla.compile.costs import compile_answer
from remat_tui.errors import RematError
from remat_tui.registry import Target

TOPOLOGY = "tpu:v5e:2x2"
SOURCE = """
import jax, jax.numpy as jnp
import remat_tui

def example():
    return (jax.ShapeDtypeStruct((2048, 256), jnp.float32),
            jax.ShapeDtypeStruct((256, 4096), jnp.float32),
            jax.ShapeDtypeStruct((4096, 256), jnp.float32))

@remat_tui.target(args=example)
def f(a, b, c):
    h = jnp.tanh(a @ b)  # TANH
    return jnp.sum((h @ c) ** 2)
"""


@pytest.fixture(scope="module")
def chip():
    try:
        return resolve_device(TOPOLOGY)
    except RematError as exc:
        pytest.skip(f"no deviceless TPU here ({exc.message})")


@pytest.fixture(scope="module")
def target_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("spaces") / "tanh_model.py"
    path.write_text(SOURCE)
    return str(path)


def by_hand(fn, args, chip):
    """jax.value_and_grad (the first argument, as the step users run) compiled
    by JAX for the chip: its memory analysis."""
    sharding = jax.sharding.SingleDeviceSharding(chip)
    placed = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding) for a in args]
    gradient = jax.value_and_grad(fn)
    return jax.jit(gradient).lower(*placed).compile().memory_analysis()


def test_the_peak_is_hbms_and_vmem_stands_beside_it(chip, target_file, remat_tui_cmd):
    proc = subprocess.run(
        [remat_tui_cmd, "memory", target_file, "--device", TOPOLOGY, "--format", "json"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    compiled = json.loads(proc.stdout)["compiled"]
    memory = compiled["memory"]

    namespace: dict = {}
    exec(compile(SOURCE, target_file, "exec"), namespace)
    stats = by_hand(namespace["f"], namespace["example"](), chip)
    live_always = (
        stats.argument_size_in_bytes + stats.output_size_in_bytes - stats.alias_size_in_bytes
    )
    allocated = live_always + stats.temp_size_in_bytes
    # The headline peak is HBM's most at one step of XLA's schedule: never less
    # than the arguments and outputs, never more than XLA's allocations (whose
    # temps JAX 0.12 counts in every memory) nor than XLA's own peak (every
    # memory at one moment). Where the peak goes accounts for it.
    peak = compiled["peak_bytes"]
    assert compiled["peak_source"] == "live"
    assert live_always <= peak <= min(allocated, stats.peak_memory_in_bytes)
    assert memory["peak_bytes"] == peak
    # VMEM holds the rest of XLA's own figure, which adds the two.
    spaces = {s["space"]: s for s in memory["other_spaces"]}
    assert "vmem" in spaces and spaces["vmem"]["peak_bytes"] > 0
    total = peak + sum(s["peak_bytes"] for s in memory["other_spaces"])
    assert compiled["backend_peak_bytes"] == stats.peak_memory_in_bytes
    assert total == pytest.approx(stats.peak_memory_in_bytes, rel=0.01)
    assert stats.peak_memory_in_bytes > 1.5 * peak  # the two memories really were mixed
    # The 32 MiB tanh, at the user's line, is VMEM's.
    tanh_line = SOURCE.splitlines().index("    h = jnp.tanh(a @ b)  # TANH") + 1
    tanh = [
        b for b in spaces["vmem"]["at_peak"]
        if b["shape"] == "f32[2048,4096]" and (b["source"] or {}).get("line") == tanh_line
    ]  # fmt: skip
    assert tanh and tanh[0]["bytes"] == 2048 * 4096 * 4
    assert not any(b["shape"] == "f32[2048,4096]" for b in memory["at_peak"])
    # The figures compiled.md and the JSON report's page give for this program
    # (they name the JAX and libtpu they were measured with).
    for page in ("docs/guide/compiled.md", "docs/reference/json-report.md"):
        text = " ".join(open(f"{ROOT}/{page}", encoding="utf-8").read().split())
        said = re.search(r"JAX ([\d.]+),? (?:and )?libtpu [\d.]+\)?:? ([\d.]+) MiB of HBM.*?"
                         r"([\d.]+) MiB of VMEM", text)  # fmt: skip
        assert said, page
        if jax.__version__ == said[1]:
            vmem = spaces["vmem"]["peak_bytes"]
            assert said.groups()[1:] == (f"{peak / 2**20:.1f}", f"{vmem / 2**20:.1f}"), page


def test_text_report_names_each_space(chip, target_file, remat_tui_cmd):
    proc = subprocess.run(
        [remat_tui_cmd, "report", target_file, "--device", TOPOLOGY, "--compiled"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "peak in vmem (not device memory)" in proc.stdout
    assert "vmem: " in proc.stdout and "at its own peak" in proc.stdout


def test_a_budget_weighs_hbm_alone(chip):
    """The budget check sees HBM's bytes, not HBM's plus VMEM's."""

    def f(a, b, c):
        return jnp.sum((jnp.tanh(a @ b) @ c) ** 2)

    args = (
        jax.ShapeDtypeStruct((2048, 256), jnp.float32),
        jax.ShapeDtypeStruct((256, 4096), jnp.float32),
        jax.ShapeDtypeStruct((4096, 256), jnp.float32),
    )
    c = compile_answer(Target(fn=f, name="f", args=lambda: args), Config(device=TOPOLOGY)).result
    assert c.peak_source == "live" and c.peak_bytes < c.backend_peak_bytes
    live_always = c.argument_bytes + c.output_bytes - c.alias_bytes
    assert live_always <= c.peak_bytes <= live_always + c.temp_bytes


def test_space_numbers_have_names_or_say_they_have_none():
    from remat_tui.core.jaxcompat.buffers import space_name

    assert space_name(5, "cpu") == space_name(5, "tpu") == "host"
    assert [space_name(n, "tpu") for n in (1, 2, 6)] == ["vmem", "sflag", "smem"]
    assert space_name(7, "tpu") == "unnamed space 7"
    assert space_name(1, "cpu") == "unnamed space 1"


def test_every_space_of_an_offloading_step_is_named(chip):
    """libtpu put a scalar in its space 6 when a step offloads (issue 30: the
    JSON said "space 6"): each space a step uses has its name."""
    from jax.ad_checkpoint import checkpoint_name

    def f(x):
        return jnp.sum(jnp.cos(checkpoint_name(jnp.sin(x), "y")))

    spec = (
        "save_and_offload_only_these_names(names_which_can_be_saved=[], "
        "names_which_can_be_offloaded=['y'], offload_src='device', offload_dst='pinned_host')"
    )
    args = (jax.ShapeDtypeStruct((256,), jnp.float32),)
    c = compile_answer(Target(fn=f, name="f", args=args), Config.make(spec, device=TOPOLOGY),
                      memory=True).result  # fmt: skip
    spaces = {s["space"] for s in c.memory["other_spaces"]}
    assert "host" in spaces and spaces <= {"vmem", "sflag", "smem", "host"}


def test_smem_is_where_a_pallas_smem_operand_goes(chip):
    """The oracle for the name: an operand a Pallas kernel takes in SMEM is
    copied into the space remat-tui calls "smem"."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    from remat_tui.core.xla.buffers.memory import compile_with_memory, memory_of

    def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] * s_ref[0]

    def scale(s, x):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                      pl.BlockSpec(memory_space=pltpu.VMEM)],
            out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        )(s, x)  # fmt: skip

    placed = jax.sharding.SingleDeviceSharding(chip)
    s = jax.ShapeDtypeStruct((1,), jnp.float32, sharding=placed)
    x = jax.ShapeDtypeStruct((8, 128), jnp.float32, sharding=placed)
    with jax.default_device(jax.devices("cpu")[0]):
        executable = compile_with_memory(jax.jit(scale).lower(s, x))
    spaces = {space.space: space for space in memory_of(executable, "tpu").other_spaces}
    assert [b.shape for b in spaces["smem"].at_peak] == ["f32[1]"]
