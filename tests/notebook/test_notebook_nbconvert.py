"""A notebook with the widget, executed headless (nbclient, which saves the
widgets' state, as `jupyter nbconvert --execute` does) and converted to HTML
with nbconvert, still shows the display: nbconvert renders a widget whose
state is saved as its view, which needs scripts from the network, and drops
any `text/html` in the same output, so the widget displays a static copy as
an output of its own. The residual table's rows are JAX's own lines, printed
in the same kernel. Needs the notebook extra and nbconvert (test extra)."""

import copy
import json
import os
from html.parser import HTMLParser

import pytest
from notebook_kernel import require_notebook_stack

require_notebook_stack()

from notebook_kernel import execute  # noqa: E402 (after the check)

try:
    from nbconvert import HTMLExporter
except ImportError as exc:  # pragma: no cover - the test extra installs it
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but nbconvert is missing: {exc}", pytrace=False)
    pytest.skip(f"{exc}: pip install -e '.[test]' for nbconvert", allow_module_level=True)

SETUP = """
import contextlib, io, json
import jax, jax.numpy as jnp
import jax.ad_checkpoint
from jax.ad_checkpoint import checkpoint_name
import remat_tui

def g(W, x):
  return jnp.sin(jnp.dot(W, x))

def f4(W1, W2, W3, x):
  x = checkpoint_name(g(W1, x), name='a')
  x = checkpoint_name(g(W2, x), name='b')
  return checkpoint_name(g(W3, x), name='c')

args = (jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4))
"""
TRUTH = """
out = io.StringIO()
with contextlib.redirect_stdout(out):
  jax.ad_checkpoint.print_saved_residuals(f4, *args)
print(json.dumps(out.getvalue().splitlines()))
"""


class Text(HTMLParser):
    """A page's text as a browser shows it: no scripts, no styles."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.hidden = [], 0

    def handle_starttag(self, tag, attrs):
        self.hidden += tag in ("script", "style")

    def handle_endtag(self, tag):
        self.hidden -= tag in ("script", "style")

    def handle_data(self, data):
        if not self.hidden:
            self.parts.append(data)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    from nbformat.v4 import new_code_cell, new_notebook

    cells = [SETUP, "w = remat_tui.widget(f4, *args)\nw", TRUTH]
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    return execute(nb, cwd=str(tmp_path_factory.mktemp("nb")))


def test_widget_state_is_saved_as_nbconvert_execute_saves_it(executed):
    assert "application/vnd.jupyter.widget-state+json" in executed.metadata.widgets


def test_converted_html_shows_the_residual_table(executed):
    truth = json.loads("".join(o["text"] for o in executed.cells[2].outputs))
    shown = copy.deepcopy(executed)
    del shown.cells[2]  # the truth's printout is not the display
    html, _ = HTMLExporter().from_notebook_node(shown)
    page = Text()
    page.feed(html)
    text = "".join(page.parts)
    assert truth and any("from the argument W1" in line for line in truth)
    for line in truth:
        assert line in text, line
    # one static copy: the widget's own output adds no second table
    assert text.count("Saved residuals (") == 1
