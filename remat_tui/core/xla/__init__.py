"""Provides what XLA says of a configuration compiled for a device, and of it
run there. Its rooms, top to bottom (each imports only those beneath it:
pyproject.toml's import-linter contract):

- `compiled_analysis`: `analyze_compiled`, an analysis with its compiled
  step, and the compiled breakdown tied to what the analysis knows.
- `verify`: whether a configuration computes what the code as written
  computes, run on the device, and which decision moves it (Contract 18).
- `run`: steps run elsewhere: compiles side by side in worker processes or on
  Ray, the app's child process, and a step run and timed on the device.
- `fates`: what XLA did with each residual (kept, recomputed, fused away,
  merged), and whether its own remat pass changed the step (Contract 14).
- `estimates`: the roofline step-time estimate, its chip table and the CPU's
  measured rates (Contracts 8 and 9).
- `compile`: compiling and the compile store: the step lowered, compiled
  once per program (`compile.service`, Contract 13), XLA's numbers read
  (`compile.compiled`) and kept on disk (`compile.store`).
- `buffers`: where a compiled program's memory goes (Contract 7): the bytes
  live at each step, the buffers at the peak and their kinds, and why a peak
  moved.
"""
