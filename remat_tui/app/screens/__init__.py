"""Provides the modal screens, one module each: help, target and device pickers, export."""

from remat_tui.app.screens.export import EXPORT_FORMATS, ExportScreen, write_export
from remat_tui.app.screens.help import HelpScreen
from remat_tui.app.screens.pick import PickScreen

__all__ = ["EXPORT_FORMATS", "ExportScreen", "HelpScreen", "PickScreen", "write_export"]
