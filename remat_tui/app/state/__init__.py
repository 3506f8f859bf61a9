"""The app's state as plain frozen values and pure functions of them (what is
wanted, what is loaded, what a drawing of an analysis holds, the status line's
words). No Textual here (pyproject.toml's import-linter contract)."""
