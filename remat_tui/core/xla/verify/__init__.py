"""Provides verify (Contract 18): whether a configuration computes what the
code as written computes, run on the device, and which decision moves it.

- `runs`: `verify`, both run on the same inputs, output by output.
- `leaves`: `compare_leaf` and `Leaf`, one output against the code as
  written's.
- `bisect`: `verify_explained`, the fewest decisions that move the gradients.
- `decisions`: a configuration's decisions, applied as subsets.
- `program_names`: what the explanation reads of the program as written
  (its checkpoint_names, the names made at each site).
"""
