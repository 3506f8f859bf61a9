"""Offloading where the device's compile has no host memory (issue 30, item
3): on CPU, XLA keeps offloaded residuals in the one memory it has, so an
offloading policy lowers nothing. remat-tui says so, counts the offloaded
bytes as the device's, and suggest never recommends such a configuration,
saying why it left it out. The oracle is JAX's own compile: with and without
the offload, by hand, at test time."""

import jax
import jax.numpy as jnp
import pytest
from jax.ad_checkpoint import checkpoint_name

import remat_tui
from remat_tui.core.search.compare import compare
from remat_tui.core.search.suggest.pipeline import suggest
from remat_tui.core.setup import policies
from remat_tui.core.units import human_bytes
from remat_tui.core.xla.compile import host_memory
from remat_tui.report import render
from remat_tui.report.suggest import render_suggest

WIDTH, ROWS = 64, 32


def block(W, x):
    h = checkpoint_name(jnp.sin(x @ W), "h")
    return jnp.tanh(h @ W.T) * h


def make(offloaded: tuple[str, ...] = (), saved: tuple[str, ...] = ()):
    """The loss with `offloaded` names sent to host and `saved` kept (the
    rest recomputed): the oracle's program, by hand."""
    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=list(saved),
        names_which_can_be_offloaded=list(offloaded),
        offload_src="device",
        offload_dst="pinned_host",
    )
    checkpointed = jax.checkpoint(block, policy=policy)

    def loss(Ws, x):
        return jnp.sum(jax.lax.scan(lambda x, W: (checkpointed(W, x), None), x, Ws)[0] ** 2)

    return loss


ARGS = (
    jax.ShapeDtypeStruct((3, WIDTH, WIDTH), jnp.float32),
    jax.ShapeDtypeStruct((ROWS, WIDTH), jnp.float32),
)
OFFLOAD_H = policies.names_policy([], ["h"]).canonical


def jax_offloads_to_host(device) -> bool:
    """JAX's own answer: its compile of the loss offloading `h`, for
    `device`, holds host memory (host temporaries), or at least differs from
    the program that keeps `h` in device memory."""
    sharding = jax.sharding.SingleDeviceSharding(device)
    placed = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding) for a in ARGS]

    def stats(fn):
        return jax.jit(jax.value_and_grad(fn)).lower(*placed).compile().memory_analysis()

    offloading, saving = stats(make(offloaded=("h",))), stats(make(saved=("h",)))
    return offloading.host_temp_size_in_bytes > 0 or (
        offloading.temp_size_in_bytes != saving.temp_size_in_bytes
    )


def test_the_cpu_has_no_host_memory_to_offload_to():
    cpu = jax.devices("cpu")[0]
    assert host_memory.offloads_to_host("cpu:0") == jax_offloads_to_host(cpu) is False
    assert host_memory.moved_bytes("cpu:0", 1024) == 0


def test_a_tpu_topology_has_host_memory():
    from remat_tui.core.setup.devices import resolve_device
    from remat_tui.errors import RematError

    try:
        chip = resolve_device("tpu:v5e:2x2")
    except RematError as exc:
        pytest.skip(f"no deviceless TPU here ({exc.message})")
    assert host_memory.offloads_to_host("tpu:v5e:2x2") == jax_offloads_to_host(chip) is True


@pytest.fixture(scope="module")
def rows():
    return compare(make(), args=ARGS).rows


def test_compare_notes_the_offload_and_weighs_its_bytes_as_the_devices(rows):
    offloading = [r for r in rows if r.host_bytes]
    assert offloading
    for row in offloading:
        assert row.offload_without_host and not row.pareto
        assert row.weighed_bytes == row.device_bytes + row.host_bytes
        assert any("offloading lowers no device memory here" in n for n in row.notes)
        assert row.to_dict()["offload_without_host"] is True
    assert not any(r.offload_without_host for r in rows if not r.host_bytes)


def test_suggest_never_recommends_an_offload_without_host_memory(rows):
    """At a budget the offloads meet by their device bytes alone, an offload
    recomputes least: it was the answer ("uses 4.0 KiB"), though its bytes
    stay on the device."""
    # suggest's space is the policies at the checkpointed function (`sites`).
    budget = min(r.device_bytes for r in rows if r.host_bytes and r.config.sites)
    got = suggest(make(), budget, args=ARGS)
    within = [r for r in got.rows if r.device_bytes <= budget]
    assert min(within, key=lambda r: r.recompute_flops).host_bytes  # the premise
    assert got.fits and not got.best.host_bytes
    assert got.best.recompute_flops == min(r.recompute_flops for r in within if not r.host_bytes)
    homeless = [r for r in got.rows if r.offload_without_host]
    assert homeless and got.skipped == len(homeless)
    assert "offload to host memory, which cpu:0's compile does not have" in got.skipped_why
    assert f"{got.skipped} left out (" in render_suggest(got, "text")


def test_where_offloading_works_the_summary_counts_host_bytes(monkeypatch, rows):
    """On a backend with host memory (as a TPU's compile has), the answer may
    offload, and its summary says how much it sends to host."""
    monkeypatch.setattr(
        "remat_tui.core.xla.compile.host_memory.offloads_to_host", lambda device: True
    )
    budget = min(r.device_bytes for r in rows if r.host_bytes and r.config.sites)
    got = suggest(make(), budget, args=ARGS)
    assert got.best.host_bytes and got.fits
    human = human_bytes(got.best.host_bytes)
    assert f"and sends {human} to host" in render_suggest(got, "text").splitlines()[0]


def test_a_compiled_offload_on_the_cpu_says_its_bytes_stay_on_the_device():
    a = remat_tui.analyze(make(), args=ARGS, compiled=True, sites={"block": OFFLOAD_H})
    assert a.totals.host_bytes and a.compiled.host_temp_bytes == 0
    assert a.time["host_seconds"] == 0  # nothing crosses to host and back
    text = render(a, "text")
    assert "which stay in device memory: XLA's compile for cpu:0 has no host memory" in text
    assert "Offloading lowers no device memory on cpu:0" in a.compiled.memory["explanation"]
