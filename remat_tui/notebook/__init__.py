"""Provides remat-tui in notebooks and terminals, a layer beside the reports
(it may use rich and the reports, never Textual or the app):

- `show.py`: `remat_tui.show(f, *args, **kwargs)`, the drop-in for JAX's
  notebook helper `print_fwd_bwd`;
- `hooks.py`: every result's own display (`_repr_html_`, `__rich__`),
  registered with the core's display registry (core/display.py);
- `analysis_html.py`, `compare_html.py`, `results_html.py` (HTML) and
  `terminal.py` (rich): the displays themselves;
- `widget.py` (with `widget.js`) and `live.py`: `remat_tui.widget(...)`, a live
  anywidget view, from the `notebook` extra.

Importing this package loads none of them: `remat_tui` imports each where it
is used, and only `widget.py` loads the widget stack.
"""
