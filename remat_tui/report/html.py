"""Provides the HTML report: one self-contained page (inline CSS, no scripts,
no external resources), every user-supplied string escaped."""

from __future__ import annotations

from html import escape

from remat_tui.core.model import Analysis, JaxprView, Residual
from remat_tui.core.units import human_bytes
from remat_tui.registry import target_label
from remat_tui.report import compiled, story
from remat_tui.report import memory as memory_view
from remat_tui.report.phrases import (
    SITE_HEADERS,
    line_marks,
    origin,
    residual_bytes_heading,
    site_row,
    structure_of,
    summary,
    what,
    where,
)
from remat_tui.report.verify import report_lines

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 110em;
       padding: 0 1em; color: #1d1f21; }
code, pre { font: 12.5px/1.35 ui-monospace, SFMono-Regular, Menlo, monospace; }
pre { background: #f6f8fa; padding: .8em; overflow-x: auto; }
table { border-collapse: collapse; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .6em; text-align: left; }
td.num { text-align: right; }
.panes { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; }
.res { background: #fff3b0; }
.rec { background: #e4ecff; }
.mark { color: #8a6d00; font-weight: bold; }
.warn { background: #fff0f0; border-left: 4px solid #d33; padding: .4em .8em; }
"""


def _pane(view: JaxprView) -> str:
    rows = []
    for i, line in enumerate(view.lines):
        classes = [
            c
            for c, lines in (("res", view.residual_lines), ("rec", view.recompute_lines))
            if i in lines
        ]
        marks = line_marks(view, i)
        text = escape(line) + (f'<span class="mark">  {escape(marks)}</span>' if marks else "")
        rows.append(f'<span class="{" ".join(classes)}">{text}</span>' if classes else text)
    return "<pre>" + "\n".join(rows) + "</pre>"


def _sites(a: Analysis) -> str:
    if not a.sites:
        return ""
    head = "".join(f"<th>{escape(h)}</th>" for h in SITE_HEADERS)
    rows = "\n".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in site_row(s)) + "</tr>" for s in a.sites
    )
    return (
        "<h2>Checkpoint sites</h2>\n"
        f"<table><thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody></table>"
    )


def _compiled(a: Analysis) -> str:
    """The compiled headline, XLA's numbers and why they differ from the residuals."""
    head = compiled.headline(a)
    if head is None:
        return ""
    rows = "\n".join(
        f'<tr><td>{escape(label)}</td><td class="num">{escape(value)}</td></tr>'
        for label, value in compiled.details(a)
    )
    c = a.compiled
    return (
        f"\n<h2>Compiled: {escape(head)}</h2>\n<table><tbody>\n{rows}\n</tbody></table>\n"
        f"<p>{escape(compiled.EXPLAINED)}</p>"
        f"{memory_view.html(c.memory, c.memory_note, memory_view.judged_peak(c))}"
    )


def _stories(a: Analysis) -> str:
    """Each residual's story (report/story.py), a definition list each."""
    if not any(r.story for r in a.residuals):
        return ""
    items = "\n".join(
        f"<li><strong>R{i}</strong><dl>"
        + "".join(f"<dt>{escape(label)}</dt><dd>{escape(words)}</dd>" for label, words in rows)
        + "</dl></li>"
        for i, r in enumerate(a.residuals, 1)
        if (rows := story.lines(r, i))
    )
    how = escape(story.HOW_TO_READ)
    return f"<h2>Each residual's story</h2>\n<p>{how}</p>\n<ul>\n{items}\n</ul>"


def _share(r: Residual, sharded: bool) -> str:
    """The per-device cell, when the residuals' per-device bytes are known."""
    return f'<td class="num">{human_bytes(r.device_share)}</td>' if sharded else ""


def _residual_head(a: Analysis) -> str:
    # sharded: the global array size, then one device's share, each called so
    size = "<th>global array size</th><th>per device</th>" if a.sharded else "<th>bytes</th>"
    return (
        f"<th>#</th><th>aval</th>{size}<th>memory</th><th>kind</th>\n"
        "<th>what</th><th>source</th><th>computed at</th>"
    )


def _verified(a: Analysis) -> str:
    """`report --verify`'s verdict, and the leaves that differ."""
    said = report_lines(a)
    return "".join(f"<p>{escape(line.strip())}</p>" for line in said)


def render(a: Analysis) -> str:
    target = target_label(a.target_file, a.target_name)
    scope = residual_bytes_heading(a)
    rows = "\n".join(
        f"<tr><td>R{i}</td><td><code>{escape(r.aval)}</code></td>"
        f'<td class="num">{human_bytes(r.bytes)}</td>{_share(r, a.sharded)}'
        f"<td>{r.memory}</td><td>{r.kind}</td>"
        f"<td>{escape(what(r))}</td><td>{escape(where(r))}</td>"
        f"<td>{escape(origin(r))}</td></tr>"
        for i, r in enumerate(a.residuals, 1)
    )
    warnings = "".join(f'<p class="warn">warning: {escape(w)}</p>' for w in a.warnings)
    if story.applied_lines(a):
        items = "".join(f"<li>{escape(line)}</li>" for line in story.applied_lines(a))
        warnings += f"<h2>{escape(story.APPLIED_HEADING.capitalize())}</h2><ul>{items}</ul>"
    if story.effect_lines(a):
        items = "".join(f"<li>{escape(line)}</li>" for line in story.effect_lines(a))
        warnings += f"<h2>{escape(story.EFFECTS_HEADING.capitalize())}</h2><ul>{items}</ul>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>remat-tui: {escape(a.target_name)} under {escape(a.policy)}</title>
<style>{CSS}</style></head>
<body>
<h1>remat-tui report: <code>{escape(a.target_name)}</code></h1>
<p>target <code>{escape(target)}</code> · policy <code>{escape(a.policy)}</code> ·{_structure(a)}
device {escape(compiled.device_name(a.device))}
({escape(compiled.device_details(a.device))}) · jax {escape(a.jax_version)} ·
remat-tui {escape(a.tool_version)}</p>
<p><strong>{escape(summary(a))}</strong></p>{_verified(a)}{_compiled(a)}
<p>Paste to get this policy:</p>
<pre>{escape(a.python)}</pre>
{warnings}
{_sites(a)}
<h2>Saved residuals</h2>{f"<p>{escape(scope[:1].upper() + scope[1:])}.</p>" if scope else ""}
<table><thead><tr>{_residual_head(a)}</tr></thead>
<tbody>
{rows}
</tbody></table>
<p>As <code>jax.ad_checkpoint.print_saved_residuals</code> prints them:</p>
<pre>{escape(chr(10).join(r.text for r in a.residuals))}</pre>
{_stories(a)}
<h2>Forward and backward jaxprs</h2>
<p><span class="res">Highlighted</span> lines define (forward) or read (backward) the
residuals marked; <span class="rec">blue ↻</span> lines recompute forward work.</p>
<div class="panes"><div><h3>forward (vjp)</h3>{_pane(a.forward)}</div>
<div><h3>backward</h3>{_pane(a.backward)}</div></div>
</body></html>
"""


def _structure(a: Analysis) -> str:
    if structure_of(a) is None:
        return ""
    return f" structure <code>{escape(str(structure_of(a)))}</code> ·"
