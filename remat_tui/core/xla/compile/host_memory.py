"""Provides `offloads_to_host`: whether XLA's compile for a device puts
offloaded values in host memory, so that offloading lowers device memory.

JAX's offloading policies move residuals to `pinned_host`, and the jaxpr
says so (`f32<host>[...]`) on every backend. Whether the compiled program
really holds them in host memory is the backend's: a deviceless TPU compile
does (host temporaries, memory space 5 in the HLO), while XLA's CPU compile
keeps them in the one memory it has, so there they stay in the device's
memory and the peak does not move (measured: the same compiled peak with and
without `offload_dot_with_no_batch_dims`).

The test is the compile itself, of the smallest program that offloads one
residual: XLA places bytes in host memory (host temporaries, or a host space
in its buffer assignment), or at least its device temporaries differ from
those of the same program keeping the residual on the device. Neither: the
offload lowers nothing there. About 0.1-0.4 s a compile, once per device per
process. (Measured on CPU and deviceless TPU compiles; on a GPU, whose XLA
has host offloading, either signal answers yes.)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import device_label
from remat_tui.core.units import human_bytes
from remat_tui.core.xla.compile.costs import compile_answer
from remat_tui.errors import RematError
from remat_tui.registry import Target

_NAME = "offloaded"


def _keeping(saved: list[str], offloaded: list[str]) -> str:
    return (
        f"save_and_offload_only_these_names(names_which_can_be_saved={saved}, "
        f"names_which_can_be_offloaded={offloaded}, offload_src='device', "
        "offload_dst='pinned_host')"
    )


_OFFLOADING, _SAVING = _keeping([], [_NAME]), _keeping([_NAME], [])
_known: dict[str, bool] = {}  # device label -> whether its compile offloads to host


def _offloading(x: jax.Array) -> jax.Array:
    return jnp.sum(jnp.cos(checkpoint_name(jnp.sin(x), _NAME)))


_PROBE = Target(
    fn=_offloading, name="offload probe", args=(jax.ShapeDtypeStruct((1024,), jnp.float32),)
)


def offloads_to_host(device: str | None) -> bool:
    """Whether XLA's compile for `device` (a label; None: JAX's default)
    holds offloaded values in host memory."""
    key = device or ""
    if key not in _known:
        try:
            _known[key] = _probe(device)
        except RematError:  # the backend refuses offloading itself: its own error says so
            return True
    return _known[key]


def _probe(device: str | None) -> bool:
    offloading = compile_answer(_PROBE, Config.make(_OFFLOADING, device=device), memory=True).result
    spaces = (offloading.memory or {}).get("other_spaces", [])
    if offloading.host_temp_bytes > 0 or any(s["space"] == "host" for s in spaces):
        return True
    saving = compile_answer(_PROBE, Config.make(_SAVING, device=device)).result
    return offloading.temp_bytes != saving.temp_bytes


def moved_bytes(device: str | None, host_bytes: float) -> float:
    """The offloaded bytes that really cross to host memory and back (what the
    step-time estimate charges the host link for): none where the compile
    has no host memory for them."""
    return host_bytes if host_bytes and offloads_to_host(device) else 0


def one_devices_host_bytes(
    host_bytes: int, global_host_bytes: int, auto_sharded_devices: int, devices: int
) -> float:
    """The offloaded bytes one device of a program over `devices` holds, and
    so moves over its own host link (Contract 17): `host_bytes`, each
    residual counted by what its aval's sharding puts on one device (a
    replicated one: all of it, on every device). Where the arguments are
    sharded automatically the avals say nothing of shares, and the global
    bytes are taken as spread evenly over the devices."""
    return global_host_bytes / devices if auto_sharded_devices > 1 else host_bytes


def stays_on_device(host_bytes: int, device: str | None = None) -> str:
    """The note on a configuration offloading `host_bytes` where the compile
    has no host memory for them: naming `device` where given (a row of
    compare shares its device with every other, and names none)."""
    where = f"on {device_label(device)}" if device is not None else "here"
    return (
        f"offloading lowers no device memory {where}: XLA's compile for the device has no "
        f"host memory space, so the {human_bytes(host_bytes)} offloaded stay in device memory"
    )
