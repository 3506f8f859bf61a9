"""Provides what XLA did with a residual (Contract 14).

- `residuals`: `link`, the jaxpr's residuals tied to the compiled step's
  values, each with its `Fate` (kept, recomputed, fused away, merged, removed).
- `unsaved`: what the forward values kept for the backward part hold where
  they hold no residual's own value.
- `value_keys`: the keys that tie a residual to the compiled values that may
  hold it.
- `remat_pass`: whether XLA's own rematerialization pass changed the step.
"""
