"""remat-tui in a real notebook: a Jupyter kernel (ipykernel) runs cells through
nbclient, as a user's notebook would, and the outputs it sends are checked
against JAX's own answers computed in the same kernel (print_saved_residuals
and the two jaxprs JAX's notebook helper `print_fwd_bwd` traces), never
against pasted strings. The widget's policy is changed as its view would
change it: a comm message from the frontend to the widget's model.

Needs the notebook extra (anywidget) and nbclient/ipykernel from the test
extra; skipped without them, except in CI (CI set), where that fails.
"""

import json
from html.parser import HTMLParser

import pytest
from notebook_kernel import require_notebook_stack

require_notebook_stack()

from notebook_kernel import client, kernel_manager  # noqa: E402 (after the check)

SETUP = """
import contextlib, io, json, re
import jax, jax.numpy as jnp
import jax.ad_checkpoint
from jax.ad_checkpoint import checkpoint_name
from jax.tree_util import tree_flatten, tree_unflatten
import remat_tui

def g(W, x):
  y = jnp.dot(W, x)
  return jnp.sin(y)

def f(W1, W2, W3, x):
  x = g(W1, x)
  x = g(W2, x)
  x = g(W3, x)
  return x

def f4(W1, W2, W3, x):
  x = checkpoint_name(g(W1, x), name='a')
  x = checkpoint_name(g(W2, x), name='b')
  x = checkpoint_name(g(W3, x), name='c')
  return x

W1 = jnp.ones((5, 4))
W2 = jnp.ones((6, 5))
W3 = jnp.ones((7, 6))
x = jnp.ones(4)

def jax_residuals(fn, *args):
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    jax.ad_checkpoint.print_saved_residuals(fn, *args)
  return out.getvalue().splitlines()

def jax_jaxprs(f, *args, **kwargs):
  # JAX's notebook's print_fwd_bwd, as it traces the two jaxprs it prints (it
  # shows them through rich.text.Text.from_ansi: JAX colours jaxprs in a kernel)
  args, in_tree = tree_flatten((args, kwargs))
  def f_(*args):
    args, kwargs = tree_unflatten(in_tree, args)
    return f(*args, **kwargs)
  fwd = jax.make_jaxpr(lambda *args: jax.vjp(f_, *args))(*args).jaxpr
  y, f_vjp = jax.vjp(f_, *args)
  res, in_tree = tree_flatten(f_vjp)
  def g_(*args):
    *res, y = args
    f_vjp = tree_unflatten(in_tree, res)
    return f_vjp(y)
  bwd = jax.make_jaxpr(g_)(*res, y).jaxpr
  return [re.sub("\x1b\\[[0-9;]*m", "", str(j)) for j in (fwd, bwd)]

def truth(fn, *args):
  print(json.dumps({"residuals": jax_residuals(fn, *args), "jaxprs": jax_jaxprs(fn, *args)}))

f3 = jax.checkpoint(f, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
POLICIES = ["as_written", "nothing_saveable", "dots_saveable", "save_only_these_names('a')"]
"""

NEW_POLICY = "dots_with_no_batch_dims_saveable"
CELLS = {
    "setup": SETUP,
    "show": "remat_tui.show(f, W1, W2, W3, x)",
    "show_truth": "truth(f, W1, W2, W3, x)",
    "show_f3": "remat_tui.show(f3, W1, W2, W3, x)",
    "show_f3_truth": "truth(f3, W1, W2, W3, x)",
    "analyze": "remat_tui.analyze(f, args=(W1, W2, W3, x))",
    "compare": "comparison = remat_tui.compare(f4, args=(W1, W2, W3, x), policies=POLICIES)\n"
    "comparison",
    "compare_rows": "print(json.dumps([r.config.policy for r in comparison.rows]))",
    "widget": "w = remat_tui.widget(f4, W1, W2, W3, x)\nw",
    "widget_after": (
        "assert w.wait(120)\n"
        "policy = getattr(jax.checkpoint_policies, w.policy)\n"
        "print(json.dumps({'policy': w.policy, 'html': w.html, 'error': w.error,\n"
        "  'truth': jax_residuals(jax.checkpoint(f4, policy=policy), W1, W2, W3, x)}))"
    ),
    "show_not_a_function": "remat_tui.show(42, x)",
}
RAISES = {"show_not_a_function"}  # cells expected to fail (nbclient's raises-exception tag)


class _Text(HTMLParser):
    """An HTML fragment's text as a browser shows it (scripts left out)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.skip = [], 0
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.skip += tag == "script"

    def handle_endtag(self, tag):
        self.skip -= tag == "script"

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


def parse(html: str) -> _Text:
    parser = _Text()
    parser.feed(html)
    return parser


def stripped(html: str) -> str:
    return "".join(parse(html).parts)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Every cell's outputs, by name, from one kernel."""
    from nbformat.v4 import new_code_cell, new_notebook

    names = list(CELLS)
    tags = {n: {"tags": ["raises-exception"]} if n in RAISES else {} for n in names}
    nb = new_notebook(cells=[new_code_cell(CELLS[n], metadata=tags[n]) for n in names])
    with kernel_manager() as km:
        runner = client(nb, km, cwd=str(tmp_path_factory.mktemp("nb")))
        with runner.setup_kernel():
            for i, name in enumerate(names):
                if name == "widget_after":
                    _set_from_the_frontend(runner, nb.cells[i - 1], "policy", NEW_POLICY)
                runner.execute_cell(nb.cells[i], i)
    return {name: nb.cells[i].outputs for i, name in enumerate(names)}


def _set_from_the_frontend(runner, widget_cell, trait: str, value) -> None:
    """Send the comm message a widget's view sends when the user changes `trait`."""
    model_id = _mime(widget_cell.outputs, "application/vnd.jupyter.widget-view+json")["model_id"]
    content = {
        "comm_id": model_id,
        "data": {"method": "update", "state": {trait: value}, "buffer_paths": []},
    }
    runner.kc.shell_channel.send(runner.kc.session.msg("comm_msg", content))


def _mime(outputs, mime: str):
    found = [o["data"][mime] for o in outputs if mime in o.get("data", {})]
    assert len(found) == 1, f"expected one {mime} output, got {len(found)}: {outputs}"
    return found[0]


def _printed(outputs) -> dict:
    text = "".join(o["text"] for o in outputs if o.get("name") == "stdout")
    return json.loads(text)


@pytest.mark.parametrize("shown,truth", [("show", "show_truth"), ("show_f3", "show_f3_truth")])
def test_show_displays_jax_residuals_and_both_jaxprs(run, shown, truth):
    outputs = run[shown]
    assert [o["output_type"] for o in outputs] == ["display_data"], "show displays, returns None"
    text = stripped(_mime(outputs, "text/html"))
    expected = _printed(run[truth])
    assert expected["residuals"], "JAX saves residuals here"
    for line in expected["residuals"]:  # shape, dtype and JAX's words, source line included
        assert line in text
    for jaxpr in expected["jaxprs"]:
        for line in jaxpr.splitlines():
            assert line in text, f"jaxpr line missing from the display: {line!r}"


def test_show_under_a_policy_shows_that_policys_residuals(run):
    as_written = set(_printed(run["show_truth"])["residuals"])
    under_policy = _printed(run["show_f3_truth"])["residuals"]
    assert set(under_policy) != as_written  # the test could tell the two apart
    text = stripped(_mime(run["show_f3"], "text/html"))
    assert "dot_general" in " ".join(under_policy)
    for line in as_written - set(under_policy):  # what the policy no longer saves is not listed
        assert line not in text


def test_analyze_as_a_cells_last_line_displays_html(run):
    (result,) = run["analyze"]
    assert result["output_type"] == "execute_result"
    html = result["data"]["text/html"]
    for line in _printed(run["show_truth"])["residuals"]:
        assert line in stripped(html)
    # the plain-text view is the text report, not the dataclass repr with every jaxpr line
    assert result["data"]["text/plain"].startswith("target  f\n")


def test_compare_displays_a_table_with_a_row_per_configuration(run):
    (result,) = run["compare"]
    html = result["data"]["text/html"]
    policies = _printed(run["compare_rows"])
    parsed = parse(html)
    assert parsed.tags.count("table") == 1
    # rows: one per configuration, plus the header row
    assert parsed.tags.count("tr") == len(policies) + 1 == 5
    text = stripped(html)
    for spec in ("as_written", "nothing_saveable", "dots_saveable", "save a"):
        assert spec in text
    assert "★" in text and "data:image/svg+xml;base64," in html


def test_widget_view_and_a_policy_changed_through_its_state(run):
    outputs = run["widget"]
    view = _mime(outputs, "application/vnd.jupyter.widget-view+json")
    assert view["model_id"]
    # where widgets cannot run, a static copy of the code as written stands
    # beside the view, an output of its own (the view's output has no text/html,
    # which nbconvert would drop for the view: tests/notebook/test_notebook_nbconvert.py)
    assert len(outputs) == 2 and "text/html" not in outputs[0]["data"]
    static = _mime(outputs, "text/html")
    assert 'class="remat-tui-static"' in static
    assert "f32[5,4] from the argument W1" in stripped(static)
    after = _printed(run["widget_after"])
    assert after["policy"] == NEW_POLICY and not after["error"]
    text = stripped(after["html"])
    assert any("output of dot_general" in line for line in after["truth"])
    for line in after["truth"]:
        assert line in text
    assert f"policy {NEW_POLICY}" in text


def test_show_given_no_function_says_so_without_a_traceback(run):
    """show(42, x): the error names what show takes, in place of JAX's
    "'int' object is not callable", and Jupyter shows the message alone."""
    (error,) = [o for o in run["show_not_a_function"] if o["output_type"] == "error"]
    assert error["ename"] == "RematError"
    assert "show takes the function to analyse" in error["evalue"]
    assert "not callable" not in error["evalue"]
    assert error["traceback"] == [f"RematError: {error['evalue']}"]  # none of our frames
