"""The panes highlight the lines that make and read a residual, not the whole
of every equation that touches one: a remat2 equation prints its ~25-line
body inline, and only the body's lines reading the residual say anything.
Lines that recompute are blue as the legend says, marks come once per
equation (not on each printed line of it), and the seed's f2 (JAX's remat
notebook) is the example."""

import re
from html.parser import HTMLParser

import jax
import jax.numpy as jnp

import remat_tui
from remat_tui.notebook import analysis_html, terminal


def g(W, x):
    y = jnp.dot(W, x)
    return jnp.sin(y)


def f2(W1, W2, W3, x):
    x = jax.checkpoint(g)(W1, x)
    x = jax.checkpoint(g)(W2, x)
    x = jax.checkpoint(g)(W3, x)
    return x


ARGS = (jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4))
# a call equation's own parameter lines: never a line that makes or reads a value
PARAMS = re.compile(r"^\s*(differentiated=|policy=|prevent_cse=|jaxpr=\{)")
CONTINUATION = re.compile(r"^\s*(dimension_numbers=|preferred_element_type=|\])")


def analysis():
    return remat_tui.analyze(f2, args=ARGS)


def remat_bodies(lines: list[str]) -> list[range]:
    """Line ranges of the backward pane's remat2 equations, read off JAX's
    text: from `= remat2[` to the `]` closing it at the same indent."""
    found = []
    for i, line in enumerate(lines):
        if "= remat2[" in line:
            indent = len(line) - len(line.lstrip())
            end = next(
                j for j in range(i + 1, len(lines))
                if lines[j].startswith(" " * indent + "]")
            )  # fmt: skip
            found.append(range(i, end + 1))
    return found


def equation_text(lines: list[str], start: int) -> str:
    """An equation's printed text from its first line to the `]` closing its
    parameters (at its indent), or its one line."""
    line = lines[start]
    if not line.rstrip().endswith("["):
        return line
    indent = " " * (len(line) - len(line.lstrip()))
    end = next(j for j in range(start + 1, len(lines)) if lines[j].startswith(indent + "]"))
    return " ".join(lines[start : end + 1])


def test_a_remat_body_is_not_highlighted_whole():
    a = analysis()
    lines = a.backward.lines
    bodies = remat_bodies(lines)
    assert len(bodies) == 3
    for body in bodies:
        marked = [i for i in body if i in a.backward.residual_lines]
        assert body[0] in marked and body[-1] in marked  # its binders and its operands
        assert not [i for i in marked if PARAMS.match(lines[i])]
        # the body's equations that read no residual (cos of a recomputed dot,
        # the mul by the cotangent) are not highlighted
        cos = next(i for i in body if " = cos " in lines[i])
        mul = next(i for i in body if " = mul " in lines[i])
        assert cos not in marked and mul not in marked


def test_each_residual_line_makes_or_reads_it():
    """Every highlighted backward line of a residual belongs to an equation
    whose text names the variable that holds it, in the pane or in the body
    it is bound to; the forward lines of an output residual define its variable."""
    a = analysis()
    for r in a.residuals:
        if r.forward_var and r.kind == "output":
            first = a.forward.lines[r.forward_lines[0]]
            assert first.lstrip().startswith(f"{r.forward_var}:"), first
    for body in remat_bodies(a.backward.lines):
        binders = re.findall(r"(\w+):\S+", a.backward.lines[body[0] + 2].split("lambda ;")[1])
        operands = a.backward.lines[body[-1]].split()[1:]
        bound = dict(zip(operands, binders, strict=True))
        for i in body[1:-1]:
            for k in a.backward.residual_lines.get(i, ()):
                inner = bound[a.residuals[k].backward_var]
                start = max(j for j in a.backward.mark_lines if j <= i)
                equation = equation_text(a.backward.lines, start)
                assert re.search(rf"\b{inner}\b", equation.split(" = ", 1)[1]), equation


def test_recomputed_lines_are_blue_and_marked_once_per_equation():
    a = analysis()
    html = analysis_html.pane(a.backward)
    blocks = Blocks.of(html)
    assert len(blocks) == len(a.backward.lines)
    for i, (style, words) in enumerate(blocks):
        if i in a.backward.recompute_lines:
            assert analysis_html.style.RECOMPUTE_BG in style, a.backward.lines[i]
        elif i in a.backward.residual_lines:
            assert analysis_html.style.RESIDUAL_BG in style
        if CONTINUATION.match(a.backward.lines[i]):
            assert "◀" not in words and "↻" not in words, words
    recomputed_reads = a.backward.recompute_lines & set(a.backward.residual_lines)
    assert recomputed_reads  # the body's dots read residuals and recompute
    for i in recomputed_reads:
        assert "border-left" in blocks[i][0]  # the amber edge the legend promises
    marks = sum(words.count("◀") for _, words in blocks)
    starts = [i for i in a.backward.residual_lines if i in a.backward.mark_lines]
    assert marks == len(starts)


def test_terminal_pane_marks_once_per_equation():
    a = analysis()
    text = terminal.pane(a.backward).plain.split("\n")
    for line, printed in zip(a.backward.lines, text, strict=False):
        if CONTINUATION.match(line):
            assert "◀" not in printed and "↻" not in printed, printed


class Blocks(HTMLParser):
    """The pane's lines: (style, text) of each block span directly in the <pre>."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth, self.blocks = 0, []

    @classmethod
    def of(cls, html: str) -> list[tuple[str, str]]:
        p = cls()
        p.feed(html)
        return p.blocks

    def handle_starttag(self, tag, attrs):
        if tag == "pre":
            self.depth = 1
            return
        if self.depth == 1 and tag == "span":
            self.blocks.append([dict(attrs).get("style", ""), ""])
        if self.depth:
            self.depth += 1

    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth > 1 and self.blocks:
            self.blocks[-1][1] += data


def test_reports_mark_an_equation_once_not_each_printed_line():
    """The Markdown and HTML reports write `◀ Rn` only where an equation
    begins: a multi-line equation's further lines (a dot_general's
    dimension_numbers, a remat2 body's lines) carry no copy of its marks."""
    from remat_tui.report import html as html_report
    from remat_tui.report import markdown as md_report

    a = analysis()
    for view in (a.forward, a.backward):
        marked = [i for i in view.residual_lines if i in view.mark_lines]
        unmarked = [i for i in view.residual_lines if i not in view.mark_lines]
        assert marked
        lines = md_report.marked_lines(view)
        assert [i for i, line in enumerate(lines) if "◀ R" in line] == sorted(marked)
        pane = html_report._pane(view)
        assert pane.count("◀ R") == len(marked)
        if view is a.backward:
            assert unmarked, "f2's backward pane reads residuals inside remat2 bodies"
