"""Provides steps run elsewhere than in the caller's thread, and on the device.

- `pool`: `run_all`, a search's independent work side by side: compiles in
  worker processes on this machine or as Ray tasks (Contract 13).
- `process`: `CompileProcess`, the app's compiles (and runs) in a child
  process of their own.
- `measure`: `measure`, a compiled step run on its local device and timed
  (Contract 9).
- `shared_runs`: what `--measure` and `verify` share where both are asked for.
"""
