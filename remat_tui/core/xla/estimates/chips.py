"""Provides the chip table a roofline step-time estimate reads: per chip, its
peak dense bf16 matmul FLOP/s, device-memory bandwidth, host <-> device link
bandwidth (each direction) and device-memory capacity.

A roofline estimate takes a step's time as at least the largest of FLOPs /
peak_flops, bytes moved / memory_bandwidth and bytes offloaded /
host_bandwidth. The accelerators' figures here are their vendors' public peak
figures, each cited by URL in `sources`: an estimate's ceiling, never a
measurement, and real programs reach only a fraction of them. The CPU alone is
measured (`measured_cpu`), since no vendor figure describes the machine the
tool runs on: once per machine, and kept (`xla.estimates.calibration`). Every
chip says where its figures come from (`Chip.rates_source`), and so does
every estimate made with them.

How the figures were read (a chip's `notes` says where one is derived or
approximate):

- FLOP/s are dense, without structured sparsity. NVIDIA lists Hopper's bf16
  Tensor Core peak with sparsity and says the dense figure is half of it.
- Bandwidths are bytes per second with decimal prefixes (1 GB/s = 1e9 B/s),
  as the vendors write them.
- Host bandwidth is one direction. NVIDIA's "PCIe Gen4: 64GB/s" and "PCIe
  Gen5: 128GB/s" count both directions of an x16 link together, so each
  direction gets half. Google publishes no per-chip PCIe figure for its TPUs;
  the TPU rows take the figures of Google's "How to Scale Your Model" (the
  scaling book), which gives 16 GB/s each way for TPU v4, about 1.6e10 B/s
  "typically" for a TPU and 3.2e10 B/s for TPU v6e.
- Transcendentals (exp, log, tanh, sin, ...) have units of their own, far
  slower than the matrix units. No vendor lists a rate for TPUs; NVIDIA lists
  its special function units' (`_NVIDIA_SFU_PER_SM`). Each chip's figure
  says how it was derived, and every one is a ceiling, as the FLOP/s are.
- Capacities are read in the unit the vendor writes: "GB" as 1e9 bytes,
  "GiB" as 2**30. Read literally, a "GB" figure may understate what the device
  reports by up to ~7% (HBM is built in binary sizes); an attached device's
  own `memory_stats()` is the better figure where there is one.
- Interconnect bandwidth (`interconnect_bandwidth`, for the collective part
  of the estimate) is one direction, all of a chip's links together:
  Google's "bidirectional inter-chip interconnect (ICI) bandwidth (per
  chip)" and NVIDIA's NVLink figure count both directions, so each
  direction gets half. A collective over one axis of a TPU torus uses only
  that axis's links, so the figure is a ceiling, as the FLOP/s are. Google's
  v4 page gives no per-chip figure: v4's collectives are counted, not timed.

Pure Python: jax is imported only when the CPU is calibrated (`xla.estimates.cpu_rates`).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from remat_tui.core.xla.estimates import calibration as calibrations


@dataclass(frozen=True)
class Chip:
    name: str  # "tpu v5e", "nvidia h100", "cpu"
    peak_flops: float  # FLOP/s, dense bf16 matmul, one chip
    memory_bandwidth: float  # bytes/s, device memory
    host_bandwidth: float  # bytes/s, host <-> device, each direction
    memory_bytes: int | None  # device memory per chip (None for cpu)
    sources: tuple[str, ...]
    notes: str = ""
    measured: bool = False  # True for the CPU, whose figures are measured here
    # Transcendental functions (exp, log, tanh, sin, ...: what XLA's cost
    # analysis counts as `transcendentals`) per second; None: unknown, and
    # they are counted at peak_flops like any other FLOP.
    transcendentals_per_second: float | None = None
    # Whether memory traffic overlaps the arithmetic (an accelerator streams
    # memory while its units compute), or adds to it (a CPU's cores do both).
    overlaps_memory: bool = True
    # Seconds any step takes however little it computes (dispatch, the
    # runtime's bookkeeping): measured for the CPU, unknown (0) elsewhere.
    overhead_seconds: float = 0.0
    # The CPU's: when and how its figures were measured, and where they are kept.
    calibration: calibrations.Calibration | None = None
    # Bytes/s one device sends to the others, one direction, all its links
    # together (the collective part of the estimate); None: unknown, the
    # collectives are counted and not timed.
    interconnect_bandwidth: float | None = None
    # Where that figure comes from, in words.
    interconnect_source: str = ""

    def interconnect(self) -> dict:
        """The interconnect figure an estimate's collective part used, and
        where it comes from (`time.interconnect` in the JSON)."""
        return {
            "bytes_per_second": self.interconnect_bandwidth,
            "source": self.interconnect_source
            or f"no interconnect figure for {self.name}: collectives counted, not timed",
        }

    def rates_source(self) -> dict:
        """Where the figures come from, for an estimate made with them
        (`time.rates` in the JSON): the CPU's calibration, or the vendors'
        published figures this table cites."""
        if self.calibration is not None:
            return self.calibration.to_dict()
        return {
            "source": f"published figures for {self.name} (remat_tui/core/xla/estimates/chips.py)",
            "references": list(self.sources),
        }


GiB = 2**30

SCALING_BOOK = "https://jax-ml.github.io/scaling-book/tpus/"
TPU_V4 = "https://cloud.google.com/tpu/docs/v4"
TPU_V5E = "https://cloud.google.com/tpu/docs/v5e"
TPU_V5P = "https://cloud.google.com/tpu/docs/v5p"
TPU_V6E = "https://cloud.google.com/tpu/docs/v6e"
NVIDIA_A100 = "https://www.nvidia.com/en-us/data-center/a100/"
NVIDIA_A100_DATASHEET = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
NVIDIA_H100 = "https://www.nvidia.com/en-us/data-center/h100/"
NVIDIA_H200 = "https://www.nvidia.com/en-us/data-center/h200/"

CUDA_GUIDE_THROUGHPUT = (
    "https://docs.nvidia.com/cuda/cuda-c-programming-guide/"
    "#arithmetic-instructions-throughput-native-arithmetic-instructions"
)

# The CUDA C++ Programming Guide's table of native arithmetic instruction
# throughput gives, for compute capability 8.0 (A100) and 9.0 (H100, H200), 16
# results per clock cycle per multiprocessor for the special functions
# (reciprocal, reciprocal square root, __log2f, exp2f, __sinf, __cosf), against
# 64 (8.0) and 128 (9.0) for 32-bit floating-point add, multiply and FMA. So a
# GPU's transcendental rate is its FP32 FLOP/s (which NVIDIA lists, an FMA
# counted as 2) / 2 / (FP32 lanes per special-function lane).
_NVIDIA_SFU_PER_SM = 16


def _sfu_rate(fp32_flops: float, fp32_lanes_per_sm: int) -> float:
    return fp32_flops / 2 / (fp32_lanes_per_sm / _NVIDIA_SFU_PER_SM)


# The scaling book's TPU chapter: the VPU is an (8, 128) array of lanes and
# sublanes, and an MXU does one bf16[8,128] @ bf16[128,128] every 8 cycles
# (256x256 and 4x the work on v6e), which with Google's peak FLOP/s gives each
# chip's clock. Google publishes no transcendental rate; the figure here
# assumes one transcendental per VPU slot per cycle, per TensorCore: an
# assumption of remat-tui's, stated as such in each chip's notes.
_VPU_SLOTS = 8 * 128


def _tpu_transcendentals(peak_flops: float, tensorcores: int, mxus: int, mxu_side: int) -> float:
    flops_per_cycle = tensorcores * mxus * 2 * mxu_side * mxu_side
    clock = peak_flops / flops_per_cycle
    return tensorcores * _VPU_SLOTS * clock


_TPU_TRANSCENDENTAL_NOTE = (
    " Transcendentals: Google publishes no rate; taken as one per VPU slot "
    "(8x128) per cycle per TensorCore, at the clock the peak FLOP/s imply (an "
    "assumption of remat-tui's, not a vendor figure)."
)

# The scaling book's TPU specs section: "PCIe bandwidth for TPU v4 is 16GB /
# second each way"; "PCIe bandwidth is typically around 1.6e10 bytes / second
# per TPU (3.2e10 for TPU v6e)". Its generic figure stands in for v5e and v5p,
# for which no generation-specific host figure is public.
_TPU_HOST_TYPICAL = 16e9


def _ici_source(chip: str, bidirectional_gbps: int, url: str) -> str:
    return (
        f"Google's bidirectional ICI bandwidth per chip for TPU {chip}, "
        f"{bidirectional_gbps} GBps, halved: one direction, all links together ({url})"
    )


def _nvlink_source(gpu: str, both_ways_gbps: int, url: str) -> str:
    return (
        f"NVIDIA's NVLink bandwidth for {gpu}, {both_ways_gbps} GB/s, halved: one direction ({url})"
    )


_CHIPS = (
    Chip(
        name="tpu v4",
        # Google: "Peak compute per chip 275 teraflops (bf16 or int8)";
        # "HBM2 capacity and bandwidth 32 GiB, 1200 GBps".
        peak_flops=275e12,
        memory_bandwidth=1200e9,
        # Scaling book: 16 GB/s each way.
        host_bandwidth=16e9,
        memory_bytes=32 * GiB,
        sources=(TPU_V4, SCALING_BOOK),
        notes="Host link from the scaling book (16 GB/s each way); Google's v4 page gives none."
        + _TPU_TRANSCENDENTAL_NOTE,
        # Two TensorCores (megacore), four 128x128 MXUs each: a 1.05 GHz clock.
        transcendentals_per_second=_tpu_transcendentals(275e12, 2, 4, 128),
        # Google's v4 page gives no per-chip ICI figure: none here.
    ),
    Chip(
        name="tpu v5e",
        # Google: "Peak compute per chip (bf16) 197 TFLOPs"; "HBM2 capacity and
        # bandwidth 16 GB, 819 GBps" (a later revision of the page lists the
        # bandwidth as "800 GiBps", ~8.6e11 B/s; the scaling book uses 8.1e11).
        peak_flops=197e12,
        memory_bandwidth=819e9,
        host_bandwidth=_TPU_HOST_TYPICAL,
        memory_bytes=16 * 10**9,
        sources=(TPU_V5E, SCALING_BOOK),
        notes="Host link approximate: the scaling book's typical per-TPU PCIe "
        "figure (1.6e10 B/s), not one stated for v5e. Memory is Google's "
        "'16 GB' read as 1e9 bytes (the scaling book says 16 GiB). A later "
        "revision of Google's page gives the HBM bandwidth as '800 GiBps'."
        + _TPU_TRANSCENDENTAL_NOTE,
        # One TensorCore, four 128x128 MXUs: the scaling book's 1.5 GHz.
        transcendentals_per_second=_tpu_transcendentals(197e12, 1, 4, 128),
        # Google: "Bidirectional inter-chip interconnect (ICI) bandwidth (per
        # chip) 400 GBps" (4 ICI ports): 200 GB/s each way.
        interconnect_bandwidth=400e9 / 2,
        interconnect_source=_ici_source("v5e", 400, TPU_V5E),
    ),
    Chip(
        name="tpu v5p",
        # Google: "Peak compute per chip (bf16) 459 TFLOPs"; "HBM2e capacity
        # and bandwidth 95GB, 2765 GBps" (the scaling book: 96GB, 2.8e12).
        peak_flops=459e12,
        memory_bandwidth=2765e9,
        host_bandwidth=_TPU_HOST_TYPICAL,
        memory_bytes=95 * 10**9,
        sources=(TPU_V5P, SCALING_BOOK),
        notes="Host link approximate: the scaling book's typical per-TPU PCIe "
        "figure (1.6e10 B/s), not one stated for v5p. Memory is Google's "
        "'95GB' read as 1e9 bytes (the scaling book says 96GB)." + _TPU_TRANSCENDENTAL_NOTE,
        # Two TensorCores, four 128x128 MXUs each: a 1.75 GHz clock.
        transcendentals_per_second=_tpu_transcendentals(459e12, 2, 4, 128),
        # Google: "Bidirectional inter-chip interconnect (ICI) bandwidth (per
        # chip) 1200 GBps" (an older revision: "Interchip Interconnect BW 4800
        # Gbps"): 600 GB/s each way.
        interconnect_bandwidth=1200e9 / 2,
        interconnect_source=_ici_source("v5p", 1200, TPU_V5P),
    ),
    Chip(
        name="tpu v6e",
        # Google (Trillium): "Peak compute per chip (bf16) 918 TFLOPs"; "HBM
        # capacity per chip 32 GB"; "HBM bandwidth per chip 1638 GBps"; each
        # chip "connects to the host through a PCIe Gen5 interface".
        peak_flops=918e12,
        memory_bandwidth=1638e9,
        # Scaling book: 3.2e10 B/s for TPU v6e ("about 2x higher than v5").
        host_bandwidth=32e9,
        memory_bytes=32 * 10**9,
        sources=(TPU_V6E, SCALING_BOOK),
        notes="Host link from the scaling book (3.2e10 B/s; it does not say per "
        "direction, read here as each direction). Memory is Google's '32 GB' "
        "read as 1e9 bytes." + _TPU_TRANSCENDENTAL_NOTE,
        # One TensorCore, four 256x256 MXUs: a 1.75 GHz clock.
        transcendentals_per_second=_tpu_transcendentals(918e12, 1, 4, 256),
        # Google: "Bidirectional inter-chip interconnect (ICI) bandwidth (per
        # chip) 800 GBps" (4 ICI ports): 400 GB/s each way.
        interconnect_bandwidth=800e9 / 2,
        interconnect_source=_ici_source("v6e", 800, TPU_V6E),
    ),
    Chip(
        name="nvidia a100",
        # A100 80GB SXM: "BFLOAT16 Tensor Core 312 TFLOPS | 624 TFLOPS*"
        # (* with sparsity); "GPU Memory Bandwidth 2,039GB/s"; "GPU Memory
        # 80GB HBM2e"; "Interconnect ... PCIe Gen4: 64GB/s".
        peak_flops=312e12,
        memory_bandwidth=2039e9,
        # 64 GB/s is both directions of PCIe Gen4 x16 together.
        host_bandwidth=32e9,
        memory_bytes=80 * 10**9,
        sources=(NVIDIA_A100, NVIDIA_A100_DATASHEET, CUDA_GUIDE_THROUGHPUT),
        notes="Figures of the A100 80GB SXM. Host link derived: NVIDIA's 'PCIe "
        "Gen4: 64GB/s' is both directions together, so 32 GB/s each way. Any "
        "A100 matches this row; a 40GB or PCIe A100 has less memory and "
        "bandwidth (same peak FLOP/s). Transcendentals derived: NVIDIA's FP32 "
        "19.5 TFLOPS over 64 FP32 lanes and 16 special-function lanes per SM "
        "(CUDA guide, compute capability 8.0).",
        # "FP32 19.5 TFLOPS"; 64 FP32 lanes per SM.
        transcendentals_per_second=_sfu_rate(19.5e12, 64),
        # "NVIDIA NVLink: 600GB/s", both directions: 300 GB/s each way.
        interconnect_bandwidth=600e9 / 2,
        interconnect_source=_nvlink_source("A100", 600, NVIDIA_A100),
    ),
    Chip(
        name="nvidia h100",
        # H100 SXM: "BFLOAT16 Tensor Core 1,979 teraFLOPS*" (* with sparsity;
        # NVIDIA: "Specifications 1/2 lower without sparsity"); "GPU Memory
        # 80GB"; "GPU Memory Bandwidth 3.35TB/s"; "PCIe Gen5: 128GB/s".
        peak_flops=1979e12 / 2,
        memory_bandwidth=3.35e12,
        # 128 GB/s is both directions of PCIe Gen5 x16 together.
        host_bandwidth=64e9,
        memory_bytes=80 * 10**9,
        sources=(NVIDIA_H100, CUDA_GUIDE_THROUGHPUT),
        notes="Figures of the H100 SXM. Peak FLOP/s derived: NVIDIA's 1,979 "
        "TFLOPS bf16 is with sparsity, dense is half (~989 TFLOPS). Host link "
        "derived: 'PCIe Gen5: 128GB/s' is both directions, so 64 GB/s each "
        "way. Any H100 matches this row; H100 PCIe and NVL parts differ. "
        "Transcendentals derived: NVIDIA's FP32 67 TFLOPS over 128 FP32 lanes "
        "and 16 special-function lanes per SM (CUDA guide, compute capability 9.0).",
        # "FP32 67 teraFLOPS"; 128 FP32 lanes per SM.
        transcendentals_per_second=_sfu_rate(67e12, 128),
        # "NVIDIA NVLink: 900GB/s", both directions: 450 GB/s each way.
        interconnect_bandwidth=900e9 / 2,
        interconnect_source=_nvlink_source("H100", 900, NVIDIA_H100),
    ),
    Chip(
        name="nvidia h200",
        # H200 SXM: "BFLOAT16 Tensor Core 1,979 TFLOPS" (with sparsity, as for
        # H100: same GPU); "GPU Memory 141GB"; "GPU Memory Bandwidth 4.8TB/s";
        # "Interconnect NVIDIA NVLink: 900GB/s, PCIe Gen5: 128GB/s".
        peak_flops=1979e12 / 2,
        memory_bandwidth=4.8e12,
        host_bandwidth=64e9,
        memory_bytes=141 * 10**9,
        sources=(NVIDIA_H200, CUDA_GUIDE_THROUGHPUT),
        notes="Figures of the H200 SXM. Peak FLOP/s derived: NVIDIA's 1,979 "
        "TFLOPS bf16 is with sparsity, dense is half (~989 TFLOPS). Host link "
        "derived: 'PCIe Gen5: 128GB/s' is both directions, so 64 GB/s each way. "
        "Transcendentals derived: NVIDIA's FP32 67 TFLOPS over 128 FP32 lanes "
        "and 16 special-function lanes per SM (CUDA guide, compute capability 9.0).",
        # "FP32 67 TFLOPS" (the H100's GPU); 128 FP32 lanes per SM.
        transcendentals_per_second=_sfu_rate(67e12, 128),
        interconnect_bandwidth=900e9 / 2,
        interconnect_source=_nvlink_source("H200", 900, NVIDIA_H200),
    ),
)

CHIPS: dict[str, Chip] = {chip.name: chip for chip in _CHIPS}

# device.device_kind of a TPU (lower case, spaces collapsed) -> its row. The
# deviceless topologies of libtpu name them "TPU v4", "TPU v5 lite" (v5e),
# "TPU v5" (v5p) and "TPU v6 lite" (v6e); the marketing names are accepted too.
_TPU_KINDS = {
    "tpu v4": "tpu v4",
    "tpu v5 lite": "tpu v5e",
    "tpu v5e": "tpu v5e",
    "tpu v5": "tpu v5p",
    "tpu v5p": "tpu v5p",
    "tpu v6 lite": "tpu v6e",
    "tpu v6e": "tpu v6e",
}

# NVIDIA device kinds ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3",
# "NVIDIA H200"): the model number as a word of its own, so "GH200" (Grace
# Hopper, other memory) and "RTX A1000" do not match.
_GPU_KINDS = tuple(
    (re.compile(rf"(?<![a-z0-9]){model}(?![0-9])"), f"nvidia {model}")
    for model in ("a100", "h100", "h200")
)
_GPU_PLATFORMS = ("gpu", "cuda")


def chip_for(platform: str, device_kind: str) -> Chip | None:
    """The chip a JAX device is (from device.platform and device.device_kind),
    or None if unknown."""
    platform = (platform or "").strip().lower()
    kind = " ".join((device_kind or "").lower().split())
    if platform == "cpu":
        return measured_cpu()
    if platform == "tpu":
        name = _TPU_KINDS.get(kind)
        return CHIPS[name] if name else None
    if platform in _GPU_PLATFORMS:
        for pattern, name in _GPU_KINDS:
            if pattern.search(kind):
                return CHIPS[name]
    return None


_cpu: Chip | None = None
_cpu_lock = threading.Lock()


def measured_cpu() -> Chip:
    """The CPU's figures, from this machine's calibration (`xla.estimates.calibration`:
    measured the first time, then kept across runs), read once per process;
    host bandwidth = memory bandwidth (host and device are the same memory)."""
    global _cpu
    with _cpu_lock:
        if _cpu is None:
            _cpu = _cpu_chip(calibrations.stored_or_measured())
        return _cpu


def recalibrate_cpu() -> Chip:
    """The CPU measured again now, and kept as this machine's calibration:
    every estimate from here on uses it."""
    global _cpu
    with _cpu_lock:
        _cpu = _cpu_chip(calibrations.calibrate())
        return _cpu


def _cpu_chip(calibration: calibrations.Calibration) -> Chip:
    rates = calibration.rates
    return Chip(
        name="cpu",
        peak_flops=rates.flops,
        memory_bandwidth=rates.bandwidth,
        host_bandwidth=rates.bandwidth,
        memory_bytes=None,
        sources=(),
        notes=calibration.method,
        measured=True,
        transcendentals_per_second=rates.transcendentals,
        overlaps_memory=False,
        overhead_seconds=rates.overhead,
        calibration=calibration,
        # CPU devices share the machine's memory: a collective among them is
        # a copy through it. Nominal: the measured memory bandwidth, not an
        # interconnect's.
        interconnect_bandwidth=rates.bandwidth,
        interconnect_source="nominal: the CPU's devices share memory, so a collective is "
        "timed as a copy at the measured memory bandwidth (no interconnect)",
    )
