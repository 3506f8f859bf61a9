"""Provides the displays of the core's results: importing this module registers,
for each result class, its notebook HTML, its plain text and its rich
renderable with the core's display registry (core/display.py says how the
core stays free of rendering). `remat_tui`'s entry points import it, after
the core they call, so a result always displays (about 40 ms of imports,
rich among them, beside an analysis' hundreds).
"""

from __future__ import annotations

from functools import partial

from rich.text import Text

from remat_tui.core.display import register
from remat_tui.core.model import Analysis
from remat_tui.core.search.compare import Comparison
from remat_tui.core.search.diff import Diff
from remat_tui.core.search.fit.results import Fit
from remat_tui.core.search.suggest.pipeline import Suggestion
from remat_tui.core.xla.compile.compiled import Compiled
from remat_tui.core.xla.verify.runs import Verification
from remat_tui.notebook import analysis_html, compare_html, fit_html, results_html, terminal, words
from remat_tui.report import comparisons, memory, text
from remat_tui.report import suggest as suggest_report
from remat_tui.report.fit import render_fit
from remat_tui.report.verify import lines as verify_lines


def compiled_text(c: Compiled) -> str:
    lines = [words.headline(c)]
    lines += [f"  {label}: {value}" for label, value in words.compiled_rows(c)]
    return (
        "\n".join(lines + memory.text_lines(c.memory, c.memory_note, memory.judged_peak(c))) + "\n"
    )


register(Analysis, html=analysis_html.render, text=text.render, rich=terminal.analysis)
register(
    Comparison,
    html=compare_html.render,
    text=partial(comparisons.render_compare, fmt="text"),
    rich=terminal.comparison,
)
register(
    Suggestion,
    html=results_html.suggestion,
    text=partial(suggest_report.render_suggest, fmt="text"),
    rich=terminal.suggestion,
)
register(
    Diff,
    html=results_html.diff,
    text=partial(comparisons.render_diff, fmt="text"),
    rich=terminal.diff,
)
register(Compiled, html=results_html.compiled, text=compiled_text, rich=terminal.compiled)
register(
    Fit,
    html=fit_html.render,
    text=partial(render_fit, fmt="text"),
    rich=terminal.fit,
)

register(
    Verification,
    html=results_html.verification,
    text=lambda v: "\n".join(verify_lines(v)) + "\n",
    rich=lambda v: Text("\n".join(verify_lines(v))),
)
