"""The main screen's widgets: they show what they are given and post what the
user picks. They import neither the controllers nor the App (pyproject.toml's
import-linter contract)."""
