"""The chip table (core/xla/estimates/chips.py): every vendor figure positive and cited, the
device kinds JAX reports mapped to the right chip (the TPU ones read from
libtpu's deviceless topologies), and the CPU measured once per process."""

import subprocess
import sys
import time

import pytest

from remat_tui.core.setup.devices import libtpu_installed
from remat_tui.core.xla.estimates import chips

VENDOR_CHIPS = (
    "tpu v4",
    "tpu v5e",
    "tpu v5p",
    "tpu v6e",
    "nvidia a100",
    "nvidia h100",
    "nvidia h200",
)


def test_the_table_holds_the_required_chips_keyed_by_name():
    assert set(chips.CHIPS) == set(VENDOR_CHIPS)
    for name, chip in chips.CHIPS.items():
        assert chip.name == name
        assert not chip.measured


@pytest.mark.parametrize("name", VENDOR_CHIPS)
def test_every_chip_has_positive_figures_and_an_https_source(name):
    chip = chips.CHIPS[name]
    assert chip.peak_flops > 0
    assert chip.memory_bandwidth > 0
    assert chip.host_bandwidth > 0
    assert isinstance(chip.memory_bytes, int) and chip.memory_bytes > 0
    assert chip.sources and all(isinstance(s, str) for s in chip.sources)
    assert any(s.startswith("https://") for s in chip.sources)
    # Sanity of the reading: the host link is far slower than device memory,
    # and nothing here is a sparse or a bidirectional figure by mistake.
    assert chip.host_bandwidth < chip.memory_bandwidth / 10
    assert 1e14 < chip.peak_flops < 1e15
    assert 1e9 < chip.host_bandwidth <= 64e9


def test_figures_derived_from_vendor_pages_are_the_ones_documented():
    # NVIDIA's bf16 figure for Hopper is with sparsity; the table holds half.
    assert chips.CHIPS["nvidia h100"].peak_flops == pytest.approx(989.5e12)
    assert chips.CHIPS["nvidia h200"].peak_flops == pytest.approx(989.5e12)
    # "PCIe Gen4: 64GB/s" / "PCIe Gen5: 128GB/s" count both directions.
    assert chips.CHIPS["nvidia a100"].host_bandwidth == 32e9
    assert chips.CHIPS["nvidia h100"].host_bandwidth == 64e9
    assert chips.CHIPS["tpu v4"].memory_bytes == 32 * 2**30
    # Every row has a figure taken from outside its spec page, derived or
    # approximate, and says which.
    assert all(chips.CHIPS[name].notes for name in VENDOR_CHIPS)


TOPOLOGY_KINDS = [
    ("v4:2x2x1", "tpu v4"),
    ("v5e:2x2", "tpu v5e"),
    ("v5p:2x2x1", "tpu v5p"),
    ("v6e:2x2", "tpu v6e"),
]


@pytest.mark.parametrize("topology, name", TOPOLOGY_KINDS)
def test_chip_for_maps_the_real_deviceless_tpu_kinds(topology, name):
    if not libtpu_installed():
        pytest.skip("libtpu is not installed: no deviceless TPU topologies")
    from jax.experimental import topologies

    try:
        desc = topologies.get_topology_desc(platform="tpu", topology_name=topology)
    except Exception as exc:  # an old or odd libtpu: nothing to check against
        pytest.skip(f"libtpu cannot give topology {topology}: {exc}")
    device = desc.devices[0]
    assert chips.chip_for(device.platform, device.device_kind) is chips.CHIPS[name]


@pytest.mark.parametrize(
    "kind, name",
    [
        # What libtpu reports, then the marketing names, in any case and spacing.
        ("TPU v4", "tpu v4"),
        ("TPU v5 lite", "tpu v5e"),
        ("TPU v5", "tpu v5p"),
        ("TPU v6 lite", "tpu v6e"),
        ("TPU v5e", "tpu v5e"),
        ("TPU v5p", "tpu v5p"),
        ("TPU v6e", "tpu v6e"),
        ("  tpu   V5  LITE ", "tpu v5e"),
    ],
)
def test_chip_for_maps_tpu_kind_strings(kind, name):
    assert chips.chip_for("tpu", kind) is chips.CHIPS[name]


@pytest.mark.parametrize(
    "platform, kind, name",
    [
        ("gpu", "NVIDIA A100-SXM4-80GB", "nvidia a100"),
        ("gpu", "NVIDIA A100-SXM4-40GB", "nvidia a100"),
        ("gpu", "NVIDIA A100 80GB PCIe", "nvidia a100"),
        ("gpu", "NVIDIA A100-PCIE-40GB", "nvidia a100"),
        ("gpu", "NVIDIA H100 80GB HBM3", "nvidia h100"),
        ("gpu", "NVIDIA H100 PCIe", "nvidia h100"),
        ("gpu", "NVIDIA H100 NVL", "nvidia h100"),
        ("gpu", "NVIDIA H200", "nvidia h200"),
        ("gpu", "nvidia h200 nvl", "nvidia h200"),
        ("cuda", "NVIDIA H100 80GB HBM3", "nvidia h100"),
        ("GPU", "NVIDIA A100-SXM4-80GB", "nvidia a100"),
    ],
)
def test_chip_for_maps_gpu_kind_strings(platform, kind, name):
    assert chips.chip_for(platform, kind) is chips.CHIPS[name]


@pytest.mark.parametrize(
    "platform, kind",
    [
        ("tpu", "TPU v3"),
        ("tpu", "TPU v2"),
        ("tpu", "TPU v4 lite"),
        ("tpu", "TPU v6"),
        ("tpu", "TPU7x"),
        ("tpu", ""),
        ("tpu", "NVIDIA H100 80GB HBM3"),  # a GPU kind on the wrong platform
        ("gpu", "NVIDIA GH200 480GB"),  # Grace Hopper: other memory, not an H200
        ("gpu", "NVIDIA RTX A1000"),
        ("gpu", "NVIDIA H20"),
        ("gpu", "NVIDIA H800"),
        ("gpu", "Tesla V100-SXM2-16GB"),
        ("gpu", "NVIDIA B200"),
        ("gpu", ""),
        ("gpu", "TPU v5 lite"),
        ("rocm", "AMD Instinct MI300X"),
        ("METAL", "Apple M2"),
        ("", ""),
    ],
)
def test_unknown_kinds_give_none(platform, kind):
    assert chips.chip_for(platform, kind) is None


def test_measured_cpu_is_positive_and_cached(monkeypatch, tmp_path):
    # Measure here, whatever ran before: no calibration kept, none read yet.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(chips, "_cpu", None)
    start = time.perf_counter()
    cpu = chips.measured_cpu()
    seconds = time.perf_counter() - start
    assert seconds < 15  # a generous bound: about 1 s on an idle 2-core machine, 3 loaded
    assert cpu.calibration is not None and cpu.calibration.file
    assert cpu.name == "cpu" and cpu.measured
    assert cpu.peak_flops > 0
    assert cpu.memory_bandwidth > 0
    assert cpu.host_bandwidth == cpu.memory_bandwidth
    assert cpu.memory_bytes is None
    assert cpu.notes
    assert chips.measured_cpu() is cpu
    assert chips.chip_for("cpu", "cpu") is cpu
    assert chips.chip_for("CPU", "anything at all") is cpu


def test_importing_the_table_loads_no_jax_textual_or_rich():
    code = "import sys, remat_tui.core.xla.estimates.chips; print(' '.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = {m.split(".")[0] for m in out.split()}
    assert not loaded & {"jax", "textual", "rich"}
