"""Provides `clear_jax_caches`: JAX's own caches emptied, for a long-lived
caller (the app) that traces configuration after configuration."""

from __future__ import annotations


def clear_jax_caches() -> None:
    """JAX's own caches emptied (`jax.clear_caches`, public API; it changes no
    result, JAX traces again what it had kept). They grow with every
    configuration traced and free nothing until each is full (an entry keyed
    weakly by a jaxpr holds that jaxpr): measured over 300 analyses kept 32
    at a time, RSS went 326 -> 367 MiB without clearing and stayed at 280
    clearing every 8."""
    import jax

    jax.clear_caches()
