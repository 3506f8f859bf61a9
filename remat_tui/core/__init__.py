"""Provides the pure analysis core: targets, policy specs, the Analysis model.

Imports jax but never textual or rich, so every number the app shows can be
tested and reused without a terminal.
"""
