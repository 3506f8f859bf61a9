"""Provides `python -m remat_tui`."""

from remat_tui.cli import main

raise SystemExit(main())
