"""Provides the configurations a search weighs, before anything is compiled.

- `distinct`: `distinct` and `merge_key`, configurations that make the same
  decisions merged (Contract 13).
- `skips`: `Skips`, the candidates a user drops (`--skip`, Contract 16).
- `structure_grid`: the structures worth trying for each scan, `nested(G)`
  and `split(K, ...)` (Contract 15), and why a scan gets none.
"""
