"""Provides the Textual app. Imported only when the TUI is launched."""
