"""Report formats against golden files (regenerate on purpose only:
REMAT_REGEN_GOLDEN=1 pytest tests/unit/test_report.py), escaping, atomic writes."""

import json
import os
from html.parser import HTMLParser

import jax
import pytest
from conftest import ROOT, checkpoints_prevent_cse

import remat_tui
from remat_tui.report import render
from remat_tui.report.write import write_atomic

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(__file__)), "golden")
POLICY = (
    "save_and_offload_only_these_names(names_which_can_be_saved=['a'], "
    "names_which_can_be_offloaded=['b'])"
)


def normalise(text: str) -> str:
    """Machine-specific parts (checkout path, versions) replaced by placeholders."""
    return (
        text.replace(ROOT, "<root>")
        .replace(jax.__version__, "<jax>")
        .replace(remat_tui.__version__, "<version>")
    )


@pytest.mark.parametrize("fmt", ["json", "md", "html", "text"])
def test_golden(notebook_targets, fmt):
    analysis = remat_tui.analyze(notebook_targets["loss"], policy=POLICY)
    got = normalise(render(analysis, fmt))
    path = os.path.join(GOLDEN, f"notebook_loss_offload.{fmt}")
    if os.environ.get("REMAT_REGEN_GOLDEN"):
        with open(path, "w") as fh:
            fh.write(got)
    with open(path) as fh:
        assert got == fh.read(), f"{fmt} report changed; regenerate golden files on purpose"


def test_json_report_residuals_are_jaxs(notebook_targets):
    from conftest import jax_saved_residuals

    from remat_tui.core.setup.loading import resolve_arguments

    t = notebook_targets["loss"]
    d = json.loads(render(remat_tui.analyze(t, policy=POLICY), "json"))
    args, kwargs = resolve_arguments(t)
    assert [r["text"] for r in d["residuals"]] == jax_saved_residuals(t.fn, POLICY, args, kwargs)


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def test_html_is_self_contained_and_escapes_user_strings(write_target):
    path = write_target(
        "import jax.numpy as jnp, remat_tui\n"
        "from jax.ad_checkpoint import checkpoint_name\n"
        "@remat_tui.target(args=lambda: (jnp.ones(3),), name='<script>alert(1)</script>')\n"
        "def f(x):\n    return checkpoint_name(jnp.sin(x), '<b>&name')\n",
        name="we<ird>.py",
    )
    target = next(iter(remat_tui.load_targets(path).values()))
    page = render(remat_tui.analyze(target, policy="save_only_these_names('<b>&name')"), "html")
    parser = _Collector()
    parser.feed(page)
    tags = {t for t, _ in parser.tags}
    assert "script" not in tags and "b" not in tags
    assert "<script>alert(1)</script>" in "".join(parser.text)  # shown, as text
    for tag, attrs in parser.tags:  # nothing is fetched from anywhere
        assert not any(k in attrs for k in ("src", "href")), (tag, attrs)


def test_write_atomic_replaces_only_when_complete(tmp_path, monkeypatch):
    target = tmp_path / "report.md"
    target.write_text("old")
    write_atomic(str(target), "new")
    assert target.read_text() == "new"

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(remat_tui.RematError, match="No space left"):
        write_atomic(str(target), "newer")
    assert target.read_text() == "new"
    assert os.listdir(tmp_path) == ["report.md"]  # no temporary file left behind


def test_write_atomic_refuses_missing_folder(tmp_path):
    with pytest.raises(remat_tui.RematError, match="does not exist"):
        write_atomic(str(tmp_path / "nope" / "r.json"), "{}")


def test_each_site_says_its_prevent_cse_as_jax_bound_it():
    """Issue 42: the JSON's sites carry the prevent_cse the code wrote, as
    the printed code keeps it: False for the scanned checkpoint written so,
    True (JAX's default) for the one written without it."""
    import jax.numpy as jnp

    def layer(x, w):
        return jnp.sin(x @ w), None

    def loss(ws, x):
        body = jax.checkpoint(layer, prevent_cse=False)  # as JAX advises inside a scan
        x, _ = jax.lax.scan(body, x, ws)
        return jnp.sum(jax.checkpoint(jnp.tanh)(x))

    args = (jnp.ones((3, 4, 4)), jnp.ones((2, 4)))
    sites = json.loads(render(remat_tui.analyze(loss, args=args), "json"))["sites"]
    assert [s["prevent_cse"] for s in sites] == checkpoints_prevent_cse(loss, *args)
    assert [s["prevent_cse"] for s in sites] == [False, True]
