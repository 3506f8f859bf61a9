"""Provides the time estimates (Contracts 8 and 9): one step's time on a chip,
without running it.

- `step_time`: the roofline estimate of one step, in five parts.
- `chips`: the chip table it reads (FLOP/s, bandwidths, memory).
- `cpu_rates`: the CPU's rates, measured with small jitted kernels.
- `calibration`: those rates measured once per machine and kept.
- `flop_note`: why remat-tui's FLOP count and XLA's differ, where they do.
"""
