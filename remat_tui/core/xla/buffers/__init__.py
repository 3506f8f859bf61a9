"""Provides where a compiled program's memory goes (Contract 7).

- `memory`: the bytes live at each step of XLA's schedule and the buffers at
  the peak, read from XLA's dump.
- `accounting`: the accounting behind it: bytes per step, buffers at the
  peak with their categories, bytes by category.
- `kinds`: what each buffer is (forward or backward, residual, parameter, ...).
- `occupancy`: the bytes live at each step, and the curve thinned for drawing.
- `made`: `forward_values`, what the compiled forward work makes, one
  `ForwardValue` per value.
- `peak_notes`: why a peak moved so much less than the residual bytes.
"""
