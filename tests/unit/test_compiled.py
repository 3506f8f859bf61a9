"""Compiled memory (Contract 6, "compiled"): the gradient as configured,
lowered with the example arguments' shapes and compiled, never run; CPU
compiles always, deviceless TPU topologies when libtpu loads. Every model here
compiles in about a second: the 24-layer transformers never appear."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from conftest import example
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import remat_tui
from remat_tui.core.setup import devices as devices_lib
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.loading import resolve_arguments, takes_devices
from remat_tui.core.xla.compile import costs as compiled_lib
from remat_tui.core.xla.compile.compiled import trim_message
from remat_tui.core.xla.compile.costs import compile_answer
from remat_tui.errors import RematError
from remat_tui.registry import Target
from remat_tui.report import render

LAYERS, WIDTH, BATCH = 4, 128, 64
KEYS = {
    "device",
    "devices",
    "temp_bytes",
    "argument_bytes",
    "output_bytes",
    "alias_bytes",
    "generated_code_bytes",
    "host_temp_bytes",
    "peak_bytes",
    "peak_source",
    "flops",
    "seconds",
    "fits",
    "needed_bytes",
    "available_bytes",
    "error",
    "step",
    "differentiated",
    "bytes_accessed",
    "transcendentals",
    "loops",
    "backend_peak_bytes",
    "spaces_note",
    "memory",
    "memory_note",
    "collectives",
}


def _args():
    f32 = jnp.float32
    return (
        jax.ShapeDtypeStruct((LAYERS, WIDTH, WIDTH), f32),
        jax.ShapeDtypeStruct((BATCH, WIDTH), f32),
    )


def block(W, x):
    return jnp.tanh(jnp.sin(x @ W) @ W)


def scanned_mlp(Ws, x):
    x, _ = jax.lax.scan(lambda x, W: (block(W, x), None), x, Ws)
    return jnp.mean(x**2)


def make_checkpointed(policy):
    """A scan over jax.checkpoint(block, policy=...): one checkpoint site."""
    checkpointed = jax.checkpoint(block, policy=policy)

    def scanned_checkpointed(Ws, x):
        x, _ = jax.lax.scan(lambda x, W: (checkpointed(W, x), None), x, Ws)
        return jnp.mean(x**2)

    return scanned_checkpointed


def target(fn, args=_args) -> Target:
    return Target(fn=fn, name=fn.__name__, args=args)


@pytest.fixture(scope="module")
def tpu():
    """A deviceless TPU topology, or a skip saying why there is none."""
    try:
        devices_lib.resolve_device("tpu:v5e:2x2")
    except RematError as exc:
        pytest.skip(f"no deviceless TPU here ({exc.message})")
    return "tpu:v5e:2x2"


def test_compiled_numbers_are_present_and_depend_on_the_policy():
    # The policy at the scanned block's checkpoint: an outer policy over the
    # whole function recomputes every layer before the backward part needs
    # the first, which leaves the peak where it was (Contract 7's example).
    t = target(make_checkpointed(jax.checkpoint_policies.everything_saveable))
    nothing = compile_answer(t, Config.make(sites={1: "nothing_saveable"})).result
    everything = compile_answer(t, Config()).result
    for c in (nothing, everything):
        assert set(c.to_dict()) == KEYS
        assert c.device == "cpu:0" and c.devices == 1
        assert c.argument_bytes == 4 * (LAYERS * WIDTH * WIDTH + BATCH * WIDTH)
        # The loss and the first argument's gradient, as jax.value_and_grad gives.
        assert c.output_bytes >= 4 * LAYERS * WIDTH * WIDTH
        # CPU's own peak leaves the temps out; the sum stands in, and says so.
        assert c.peak_source == "sum"
        assert c.peak_bytes == c.argument_bytes + c.output_bytes + c.temp_bytes - c.alias_bytes
        assert c.flops and c.flops > 0 and c.seconds > 0
    # Saving everything keeps every iteration's values for the backward pass.
    assert everything.temp_bytes > nothing.temp_bytes
    assert everything.peak_bytes > nothing.peak_bytes


def test_analyze_attaches_compiled_only_on_request():
    t = target(scanned_mlp)
    plain = remat_tui.analyze(t, policy="nothing_saveable")
    assert plain.compiled is None and plain.to_dict()["compiled"] is None
    a = remat_tui.analyze(t, policy="nothing_saveable", compiled=True)
    assert a.to_dict()["compiled"] == a.compiled.to_dict()
    # The compile is cached (the same object comes back, with its breakdown); the
    # analysis adds to the breakdown only what it knows: residual names, the
    # sentence against the code as written.
    cached = compile_answer(t, Config.make("nothing_saveable"), memory=True).result
    assert compile_answer(t, Config.make("nothing_saveable")).result is cached
    assert {**a.compiled.to_dict(), "memory": None} == {**cached.to_dict(), "memory": None}
    assert a.compiled.memory["peak_bytes"] == cached.memory["peak_bytes"]


def test_site_overrides_reach_the_compile():
    """Overriding the site compiles what editing the policy in the source does."""
    as_written = target(make_checkpointed(jax.checkpoint_policies.nothing_saveable))
    edited = target(make_checkpointed(jax.checkpoint_policies.everything_saveable))
    base = compile_answer(as_written, Config.make()).result
    overridden = compile_answer(
        as_written, Config.make(sites={"block": "everything_saveable"})
    ).result
    by_hand = compile_answer(edited, Config.make()).result
    assert overridden.temp_bytes != base.temp_bytes
    assert (overridden.temp_bytes, overridden.peak_bytes) == (
        by_hand.temp_bytes,
        by_hand.peak_bytes,
    )
    removed = compile_answer(as_written, Config.make(sites={"block": "as_written"})).result
    assert (
        removed.temp_bytes == compile_answer(target(scanned_mlp), Config.make()).result.temp_bytes
    )


def test_results_are_cached_per_target_and_config():
    t = target(scanned_mlp)
    first = compile_answer(t, Config.make("dots_saveable")).result
    assert compile_answer(t, Config.make("dots_saveable")).result is first
    assert compile_answer(target(scanned_mlp), Config.make("dots_saveable")).result is not first
    assert compiled_lib.CACHE_SIZE >= 64


def test_a_failing_compile_shows_xlas_message_trimmed(monkeypatch):
    message = (
        "INTERNAL: Mosaic failed to compile the kernel.\n\n"
        "while lowering custom_call.7 in fusion.3\nline one\nline two\nline three\n"
        "=== Source Location Trace: ===\nlearning/foo/bar.cc:123\n"
    )

    def fail(self, *a, **k):
        raise jax.errors.JaxRuntimeError(message)

    monkeypatch.setattr(jax.stages.Lowered, "compile", fail)
    t = target(scanned_mlp)
    with pytest.raises(RematError) as info:
        compile_answer(t, Config.make("nothing_saveable"))
    text = info.value.message
    assert text.startswith("scanned_mlp: compiling the gradient under policy nothing_saveable")
    assert "for cpu:0 failed: XLA says:" in text
    assert "Mosaic failed to compile" in text and "while lowering" in text
    assert "Source Location" not in text and "learning/" not in text and "\n\n" not in text
    assert text.rstrip().endswith("...")  # more lines than shown
    # The failure is cached too: the same code fails the same way, at once.
    monkeypatch.undo()
    with pytest.raises(RematError, match="Mosaic failed"):
        compile_answer(t, Config.make("nothing_saveable"))


# XLA's words when a program does not fit, as its TPU compiler prints them.
OOM_MESSAGES = {
    "CompileTimeHbmOom": (
        "RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: Ran out of memory on HBM, the total "
        "memory required for HLO temporaries (16.00G) exceeds available HBM (15.75G). HLO "
        "module: jit_gradient.",
        16 * 2**30,
        int(15.75 * 2**30),
    ),
    "Used of": (
        "RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm.\n\n"
        "Used 20.5G of 15.75G hbm. Exceeded hbm capacity by 4.7G.\n",
        int(20.5 * 2**30),
        int(15.75 * 2**30),
    ),
    "no figures": ("RESOURCE_EXHAUSTED: out of memory while compiling", None, None),
}


@pytest.mark.parametrize("case", list(OOM_MESSAGES))
def test_a_compile_out_of_memory_is_a_result_not_an_error(monkeypatch, case):
    message, needed, available = OOM_MESSAGES[case]

    def fail(self, *a, **k):
        raise jax.errors.JaxRuntimeError(message)

    monkeypatch.setattr(jax.stages.Lowered, "compile", fail)
    c = compile_answer(target(scanned_mlp), Config.make("dots_saveable")).result
    assert not c.fits
    assert c.needed_bytes == needed and c.available_bytes == available
    assert c.error == message.splitlines()[0][:300]
    assert set(c.to_dict()) == KEYS


def test_trim_message_keeps_the_first_meaningful_lines():
    assert trim_message("A\n\n  B  \nC\nD\nE\nF") == "  A\n  B\n  C\n  D\n  ..."
    assert trim_message("") == "  (no message)"
    assert trim_message("x" * 400).endswith("...") and len(trim_message("x" * 400)) == 302


def sharded_args(devices):
    """W replicated and x split over a mesh of `devices`, as a target's args factory."""
    mesh = jax.make_mesh(
        (len(devices),), ("data",), axis_types=(AxisType.Explicit,), devices=devices
    )
    return (
        jax.ShapeDtypeStruct((WIDTH, WIDTH), jnp.float32, sharding=NamedSharding(mesh, P())),
        jax.ShapeDtypeStruct(
            (BATCH, WIDTH), jnp.float32, sharding=NamedSharding(mesh, P("data", None))
        ),
    )


def sharded(W, x):
    return jnp.sum(block(W, x))


def test_args_factory_takes_the_device_set():
    """A factory with a `devices` parameter builds its own mesh from the
    chosen devices (the four CPU devices conftest forces); the gradient
    compiles over all of them and the numbers are per device."""
    seen = []

    def args(devices):
        seen.append(devices)
        return sharded_args(devices)

    t = Target(fn=sharded, name="sharded", args=args)
    assert takes_devices(t) and not takes_devices(target(scanned_mlp))
    a = remat_tui.analyze(t, device="cpu:0", compiled=True)
    assert seen[-1] == jax.devices("cpu") and len(seen[-1]) == 4
    assert a.compiled.devices == 4
    assert a.compiled.argument_bytes == 4 * (WIDTH * WIDTH + BATCH * WIDTH // 4)
    assert a.sharded
    resolve_arguments(t)  # None: JAX's local devices
    assert seen[-1] == jax.devices()


def test_missing_libtpu_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "libtpu", None)  # `import libtpu` raises ImportError
    monkeypatch.delenv("TPU_LIBRARY_PATH", raising=False)
    assert not devices_lib.libtpu_installed()
    with pytest.raises(RematError) as info:
        devices_lib.resolve_device("tpu:v5e:2x2")
    assert "pip install 'remat-tui[tpu]'" in info.value.message
    assert not any(d.startswith("tpu:") for d in devices_lib.available_devices())
    with pytest.raises(RematError, match=r"remat-tui\[tpu\]"):
        remat_tui.analyze(target(scanned_mlp), device="tpu:v5e:2x2")


def test_a_local_tpu_index_is_not_a_topology():
    with pytest.raises(RematError, match="unknown device 'tpu:0'"):
        devices_lib.resolve_device("tpu:0")


# ---- deviceless TPU (libtpu installed: pip install -e '.[tpu]') -------------------------


def test_deviceless_tpu_compile_of_a_small_model(tpu):
    t = target(make_checkpointed(jax.checkpoint_policies.nothing_saveable))
    cpu = remat_tui.analyze(t)
    a = remat_tui.analyze(t, device=tpu, compiled=True)
    # Traced on the CPU: the same residuals; compiled for one chip of the slice.
    assert [r.text for r in a.residuals] == [r.text for r in cpu.residuals]
    assert a.device["platform"] == "tpu" and a.device["topology"] == "v5e:2x2"
    assert a.device["chips"] == 4
    c = a.compiled
    assert c.device == "tpu:v5e:2x2" and c.devices == 1
    # The peak is HBM's alone, at one step of XLA's schedule; the backend's own
    # adds the temporaries kept in VMEM at that moment.
    live_always = c.argument_bytes + c.output_bytes - c.alias_bytes
    assert c.peak_source == "live"
    # (Not bounded by temp_bytes: JAX 0.10's libtpu leaves its preallocated
    # temporaries out of it, and this step's temps are all such.)
    assert live_always <= c.peak_bytes
    assert c.backend_peak_bytes >= c.peak_bytes
    assert c.argument_bytes == 4 * (LAYERS * WIDTH * WIDTH + BATCH * WIDTH)
    assert c.generated_code_bytes > 0
    everything = compile_answer(
        t, Config.make(sites={"block": "everything_saveable"}, device=tpu)
    ).result
    # Temps this small stay on chip, mostly in VMEM: the backend's peak, which
    # counts them, moves with the policy; HBM's moves less, or not at all.
    assert everything.backend_peak_bytes > c.backend_peak_bytes
    assert everything.peak_bytes >= c.peak_bytes
    assert (everything.backend_peak_bytes - c.backend_peak_bytes
            > everything.peak_bytes - c.peak_bytes)  # fmt: skip
    assert devices_lib.device_label(devices_lib.resolve_device(tpu)) == tpu
    assert tpu in devices_lib.available_devices()
    text = render(a, "text")
    assert "device  tpu:v5e:2x2\n" in text
    assert "per device (compiled for tpu:v5e:2x2)" in text
    # Said as what it is (issue 30): not the sum of the sizes listed under it.
    assert "(HBM's live peak: the most bytes live at one step of XLA's schedule" in text
    # The allocation sizes added up, which a user adds by hand, are said apart
    # and said not to be the peak (issue 41).
    peak_row = next(line for line in text.splitlines() if "peak per device" in line)
    assert "arguments + outputs" not in peak_row
    assert "XLA's allocation sizes added up" in text
    assert "(TPU v5 lite, 4 chips, compile only)" in render(a, "md")


def test_sharded_target_compiles_over_the_topologys_chips(tpu):
    t = Target(fn=sharded, name="sharded", args=sharded_args)
    c = compile_answer(t, Config.make(device=tpu)).result
    assert c.devices == 4 and c.device == tpu
    assert c.argument_bytes == 4 * (WIDTH * WIDTH + BATCH * WIDTH // 4)


def test_arguments_sharded_over_other_devices_are_refused(tpu):
    mesh = jax.make_mesh((4,), ("data",), devices=jax.devices("cpu"))
    x = jax.ShapeDtypeStruct((BATCH, WIDTH), jnp.float32, sharding=NamedSharding(mesh, P("data")))
    t = Target(fn=lambda x: jnp.sum(jnp.sin(x)), name="f", args=(x,))
    with pytest.raises(RematError, match="sharded over cpu devices.*args=lambda devices"):
        compile_answer(t, Config.make(device=tpu))


def test_a_compile_that_does_not_fit_the_chip(tpu):
    big = (jax.ShapeDtypeStruct((70000, 30000), jnp.float32),)  # nothing is allocated
    t = Target(fn=lambda x: jnp.sum(jnp.sin(x @ x.T) @ x), name="big", args=big)
    c = compile_answer(t, Config.make(device=tpu)).result
    assert not c.fits and c.device == tpu
    assert "RESOURCE_EXHAUSTED" in c.error
    # v5e has 16 GiB of HBM: XLA's need is above what it says is available.
    assert c.needed_bytes > c.available_bytes and c.available_bytes <= 16 * 2**30
    text = render(remat_tui.analyze(t, device=tpu, compiled=True), "text")
    assert f"does not fit {tpu}: XLA needs" in text


def test_the_cli_compiles_for_a_topology_quietly_beside_a_jax_process(tpu, remat_tui_cmd):
    """libtpu, when installed, takes /tmp/libtpu_lockfile in every JAX process
    and complains on stderr on a machine without chips; remat-tui must load a
    topology anyway, and print nothing of libtpu's (it would land on the app)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TPU_ACCELERATOR_TYPE", "TPU_WORKER_HOSTNAMES", "ALLOW_MULTIPLE_LIBTPU_LOAD")
    }
    holder = subprocess.Popen(
        [sys.executable, "-c", "import jax, time; jax.devices(); print('up', flush=True); "
         "time.sleep(60)"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "up"
        proc = subprocess.run(
            [remat_tui_cmd, "report", example("mlp.py"), "--device", tpu, "--compiled"],
            capture_output=True,
            text=True,
            env=env,
        )
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "remat-tui: compiles: 1 program compiled\n"  # nothing from libtpu
    assert "per device (compiled for tpu:v5e:2x2)" in proc.stdout


def test_an_unknown_topology_is_named(tpu):
    with pytest.raises(RematError) as info:
        devices_lib.resolve_device("tpu:v9z:2x2")
    assert "unknown TPU topology 'v9z:2x2'" in info.value.message
    assert "tpu:v5e:2x2" in info.value.message


def test_flops_and_bytes_accessed_are_xlas_own():
    """What the step-time estimate reads from XLA: its cost analysis of the
    same gradient, compiled by JAX directly."""
    fn = make_checkpointed(jax.checkpoint_policies.nothing_saveable)
    c = compile_answer(target(fn), Config()).result
    args = _args()

    gradient = jax.value_and_grad(fn)  # the first argument, as the step users run
    costs = jax.jit(gradient).lower(*args).compile().cost_analysis()
    costs = costs[0] if isinstance(costs, (list, tuple)) else costs
    assert c.flops == pytest.approx(costs["flops"])
    assert c.bytes_accessed == pytest.approx(costs["bytes accessed"]) and c.bytes_accessed > 0
