"""The Python API and the notebook displays on every zoo model (issue 41,
Wanted 2), and the origins sweep (`liborigins`-style, as
tests/unit/test_library_origins.py does for library layers): for every
model and every built-in policy (and the target's own), every output and
every named residual says where it was computed, a line of the model's file.
"""

from __future__ import annotations

import pytest

from zoo import MODELS
from zoo import oracle as hand
from zoo.runs import residual_budget

pytest.importorskip("flax")
pytest.importorskip("equinox")


def each_model():
    return pytest.mark.parametrize("model", MODELS, ids=[m.id for m in MODELS])


@each_model()
def test_suggest_answers_and_displays_in_a_notebook(model):
    import remat_tui

    got = remat_tui.suggest(hand.registered(model), residual_budget(model))
    html = got._repr_html_()
    assert html.lstrip().startswith("<") and "suggest" in html.lower(), html[:500]


@each_model()
def test_show_renders(model, capsys):
    import remat_tui

    remat_tui.show(hand.registered(model))
    printed = capsys.readouterr().out
    assert "residual" in printed.lower(), printed[:500]


def sweep() -> list:
    """(model, policy) for every model and every policy it is offered."""
    from remat_tui.core.setup.policies import BUILTINS

    own = {"seed-loss": ["save_a_and_dots"]}  # examples/notebook.py:loss declares one
    return [
        pytest.param(m, p, id=f"{m.id}-{p}")
        for m in MODELS
        for p in [s.canonical for s in BUILTINS] + own.get(m.id, [])
    ]


@pytest.mark.parametrize("model,policy", sweep())
def test_origins_point_at_the_models_file(model, policy):
    import remat_tui

    analysis = remat_tui.analyze(hand.registered(model), policy=policy)
    checked = [r for r in analysis.residuals if r.kind in ("output", "named")]
    elsewhere = [
        (r.text, r.kind, r.origin.source and r.origin.source.where())
        for r in checked
        if r.origin is None or r.origin.source is None or r.origin.source.file != model.path
    ]
    assert not elsewhere, (
        f"{len(elsewhere)} of {len(checked)} not at a line of {model.path}: {elsewhere[:4]}"
    )
