"""Provides remat-tui's version (kept in step with pyproject.toml's), in a
module of its own so the core can name it without importing the package root."""

__version__ = "0.1.0"
