"""The displays of results outside a kernel: the HTML keeps to what survives a
sanitiser (a saved notebook reopened untrusted in JupyterLab, GitHub), every
string is escaped, the compare table reads without its script, a result made
before the displays are registered falls back to its repr, and `show` in a
plain terminal prints with rich what JAX's print_saved_residuals prints."""

import os
import re
import subprocess
import sys
from html.parser import HTMLParser

import jax.numpy as jnp
import pytest
from conftest import jax_saved_residuals
from jax.ad_checkpoint import checkpoint_name

import remat_tui
from remat_tui.core import display

# JupyterLab's sanitizer (packages/apputils/src/sanitizer.ts) allows these tags;
# <script>, <style> and <svg> are not among them.
SANITIZER_TAGS = set(
    "a abbr acronym address area article aside audio b bdi bdo big blockquote br button "
    "canvas caption center cite code col colgroup colspan command data datalist dd del "
    "details dfn dir div dl dt em fieldset figcaption figure font footer form h1 h2 h3 h4 "
    "h5 h6 header hgroup hr i img input ins kbd label legend li map mark menu meter nav "
    "nobr ol optgroup option output p pre progress q rowspan s samp section select small "
    "source span strike strong sub summary sup table tbody td textarea tfoot th thead time "
    "tr track tt u ul var video wbr".split()
)
# ... and of the inline style properties it keeps, these are the ones the displays use.
SANITIZER_STYLES = {
    "background", "border-bottom", "border-collapse", "border-left", "color", "display",
    "font-family", "font-size", "font-weight", "height", "line-height", "margin",
    "max-height", "max-width", "opacity", "overflow-x", "overflow-y", "padding",
    "padding-left", "table-layout", "text-align", "text-indent", "vertical-align",
    "white-space", "width", "word-wrap",
}  # fmt: skip
# Its colours are hex, rgb() or rgba() with an alpha of 0.x or 1 (a leading zero).
COLOUR = re.compile(r"rgba?\(([^)]*)\)")


class Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs, self.styles, self.text, self.in_script = [], set(), [], [], 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.in_script += tag == "script"
        for name, value in attrs:
            self.attrs.add((tag, name))
            if name == "style":
                self.styles += [d.strip() for d in value.split(";") if d.strip()]

    def handle_endtag(self, tag):
        self.in_script -= tag == "script"

    def handle_data(self, data):
        if not self.in_script:
            self.text.append(data)


def parsed(html: str) -> Tags:
    p = Tags()
    p.feed(html)
    return p


def g(W, x):
    return jnp.sin(jnp.dot(W, x))


def layers(W1, W2, W3, x):
    x = checkpoint_name(g(W1, x), name="a")
    x = checkpoint_name(g(W2, x), name="b")
    return checkpoint_name(g(W3, x), name="c")


ARGS = (jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4))


@pytest.fixture(scope="module")
def results():
    return {
        "analysis": remat_tui.analyze(layers, args=ARGS, policy="save_only_these_names('a')"),
        "compare": remat_tui.compare(
            layers, args=ARGS, policies=["as_written", "nothing_saveable", "dots_saveable"]
        ),
        "suggest": remat_tui.suggest(layers, "450B", args=ARGS),
        "diff": remat_tui.diff(layers, "nothing_saveable", "save_only_these_names('a')", args=ARGS),
        "compiled": remat_tui.analyze(layers, args=ARGS, compiled=True),
        "fit": remat_tui.fit(
            lambda W, x: jnp.mean(jnp.tanh(x @ W) ** 2),
            "64KiB",
            args=lambda batch=8: (jnp.ones((16, 16)), jnp.ones((batch, 16))),
            policies=["as_written", "nothing_saveable"],
        ),
    }


def _result(results, kind):
    return results["compiled"].compiled if kind == "compiled alone" else results[kind]


@pytest.mark.parametrize(
    "kind", ["analysis", "compare", "suggest", "diff", "compiled", "compiled alone", "fit"]
)
def test_html_keeps_to_what_sanitisers_keep(results, kind):
    html = _result(results, kind)._repr_html_()
    assert "http:" not in html and "https:" not in html  # nothing to fetch
    p = parsed(html)
    assert set(p.tags) - {"script"} <= SANITIZER_TAGS
    assert "script" not in p.tags or kind in ("compare", "suggest")  # the sort, an extra
    extra = {a for a in p.attrs if a[1] not in ("style", "class", "id", "title")}
    # data-sort feeds the sort script only; an <img>'s src and alt are allowed
    assert extra <= {("td", "data-sort"), ("img", "src"), ("img", "alt")}
    for declaration in p.styles:
        name, _, value = declaration.partition(":")
        assert name.strip() in SANITIZER_STYLES, declaration
        assert "var(" not in value and "currentcolor" not in value.lower(), declaration
        for colour in COLOUR.findall(value):
            parts = [c.strip() for c in colour.split(",")]
            assert len(parts) == 3 or re.fullmatch(r"0(\.\d+)?|1", parts[3]), declaration


def test_analysis_html_lists_jax_residuals_with_bytes(results):
    a = results["analysis"]
    p = parsed(a._repr_html_())
    text = "".join(p.text)
    expected = jax_saved_residuals(layers, "save_only_these_names('a')", ARGS, {})
    assert [r.text for r in a.residuals] == expected
    for r in a.residuals:
        assert r.text in text
    assert "80 B" in text  # W1's bytes
    assert f"total: {a.totals.device_bytes} B on device" in text


def test_compare_table_reads_without_its_script(results):
    c = results["compare"]
    html = c._repr_html_()
    without_script = re.sub(r"<script>.*?</script>", "", html, flags=re.S)
    p = parsed(without_script)
    assert p.tags.count("tr") == len(c.rows) + 1
    text = "".join(p.text)
    for spec in ("as_written", "nothing_saveable", "dots_saveable"):
        assert spec in text
    stars = sum(r.pareto for r in c.rows)
    assert stars and len(re.findall(r">★</td>", html)) == stars
    assert 'src="data:image/svg+xml;base64,' in html


def test_fit_result_shows_its_rows_chart_and_paste(results):
    f = results["fit"]
    p = parsed(f._repr_html_())
    text = "".join(p.text)
    assert p.tags.count("tr") == len(f.rows) + 1 and p.tags.count("img") == 1
    assert f.best.python in text and f"batch {f.best.batch}" in text
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(f)
    assert f"best: {f.best.policy} at batch {f.best.batch}" in console.export_text()


def test_compiled_result_shows_where_the_peak_goes(results):
    compiled = results["compiled"].compiled
    assert compiled.memory is not None
    p = parsed(compiled._repr_html_())
    text = "".join(p.text)
    assert "Where the peak goes" in text and "at the peak" in text
    assert p.tags.count("img") == 1  # the curve of live bytes
    biggest = compiled.memory["at_peak"][0]
    assert biggest["instruction"] in text


def test_every_string_is_escaped():
    planted = "<b onmouseover=x>name</b>"

    def fn(x):
        return jnp.sum(checkpoint_name(jnp.sin(x), planted))

    fn.__name__ = planted
    a = remat_tui.analyze(fn, args=(jnp.ones(3),))
    p = parsed(a._repr_html_())
    assert "b" not in p.tags
    assert planted in "".join(p.text)


def test_results_fall_back_to_their_repr_before_displays_are_registered():
    class Result(display.Displayable):
        def __repr__(self):
            return "Result[bold]"

    assert Result()._repr_html_() is None and Result()._repr_mimebundle_() == {}
    assert str(Result().__rich__()) == "Result[bold]"
    from rich.console import Console

    console = Console(record=True, width=40)
    console.print(Result())
    assert "Result[bold]" in console.export_text()  # as text, not read as markup


def test_rich_display_of_an_analysis(results):
    from rich.console import Console

    a = results["analysis"]
    console = Console(record=True, width=200)
    console.print(a)
    out = console.export_text()
    assert "forward computation (vjp):" in out and "backward computation:" in out
    for r in a.residuals:
        assert r.text in out
    assert f"total: {len(a.residuals)} residuals" in out


SHOW = """
import contextlib, io, json, sys
import jax, jax.numpy as jnp
import jax.ad_checkpoint
import remat_tui

def g(W, x):
  return jnp.sin(jnp.dot(W, x))

def f(W1, W2, W3, x):
  return g(W3, g(W2, g(W1, x)))

args = (jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4))
f3 = jax.checkpoint(f, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
remat_tui.show(f3, *args)
out = io.StringIO()
with contextlib.redirect_stdout(out):
  jax.ad_checkpoint.print_saved_residuals(f3, *args)
with open(sys.argv[1], "w") as truth:
  truth.write(out.getvalue())
"""


def test_show_in_a_terminal_prints_the_residuals_with_rich(tmp_path):
    truth = tmp_path / "truth.txt"
    proc = subprocess.run(
        [sys.executable, "-c", SHOW, str(truth)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    expected = truth.read_text().splitlines()
    assert any("dot_general" in line for line in expected)
    for line in expected:
        assert line in proc.stdout
    assert "forward computation (vjp):" in proc.stdout and "<div" not in proc.stdout
    assert "saved residuals (as jax.ad_checkpoint.print_saved_residuals prints them)" in proc.stdout
    assert f"total: {len(expected)} residuals" in proc.stdout
