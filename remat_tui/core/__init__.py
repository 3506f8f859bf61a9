"""Provides the pure analysis core: targets, policy specs, the Analysis model.

Imports jax but never textual or rich, so every number the app shows can be
tested and reused without a terminal.

Its stages, top to bottom (pyproject.toml's import-linter contracts): `search`
(many configurations weighed), `xla` (what XLA says of one compiled, and of it
run), `trace` (one configuration traced and analysed), `costs` (FLOPs),
`setup` (targets, configurations, devices) and `jaxcompat` (JAX's private
structure read into plain values). Beside them, `runtime` (the process's own
utilities) and the analysis model's views: `model`, `places`, `stories`,
`display` and `units`.
"""
