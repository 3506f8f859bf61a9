"""remat-tui follows whichever remat the user's JAX runs. The noxfile's remat3
session runs this file (with the oracle tests) under JAX_REMAT3=1; the plain
sessions run it under remat2. Each test holds in both; the last ones check
that remat3 is really what ran when the flag is on."""

import os

import jax
import jax.numpy as jnp
import pytest
from conftest import jax_saved_residuals
from jax.ad_checkpoint import checkpoint_name
from test_sites import ckpt

import remat_tui
from remat_tui.core import jaxcompat as jc

X = jnp.ones(4)
REMAT3 = os.environ.get("JAX_REMAT3") == "1"


def g(x):
    a = checkpoint_name(jnp.sin(x), "a")
    return jnp.cos(a) * x


def make(spec):
    """A function with one checkpoint site whose policy is `spec` (a factory:
    the oracle for an override is this source with the policy changed)."""
    inner = ckpt(g, spec)

    def f(x):
        return jnp.sum(jnp.tanh(inner(x)))

    return f


SPECS = ["nothing_saveable", "save_only_these_names('a')", "everything_saveable", "as_written"]


@pytest.mark.parametrize("spec", SPECS)
def test_residuals_match_jax_under_this_remat(spec):
    want = jax_saved_residuals(make(spec), "as_written", (X,), {})
    a = remat_tui.analyze(make(spec), args=(X,))
    assert [r.text for r in a.residuals] == want


def test_top_level_checkpoint_names_a_as_jax_does():
    # The case whose wording differs between remat2 and remat3.
    spec = "save_only_these_names('a')"
    want = jax_saved_residuals(g, spec, (X,), {})
    a = remat_tui.analyze(g, args=(X,), policy=spec)
    assert [r.text for r in a.residuals] == want


@pytest.mark.parametrize("override", SPECS)
def test_site_override_equals_the_source_edited_by_hand(override):
    a = remat_tui.analyze(make("nothing_saveable"), args=(X,), sites={1: override})
    want = jax_saved_residuals(make(override), "as_written", (X,), {})
    assert [r.text for r in a.residuals] == want
    assert [s.function for s in a.sites] == ["g"]
    assert a.sites[0].override == remat_tui.core.setup.policies.parse(override).canonical


def test_sites_names_and_recompute_marks():
    a = remat_tui.analyze(make("save_only_these_names('a')"), args=(X,))
    (site,) = a.sites
    assert site.function == "g" and site.policy == "save_only_these_names('a')"
    assert site.source is not None and site.source.function.endswith("f")
    assert [n.name for n in a.names] == ["a"]
    # The backward pane marks the recomputed lines (cos of the saved 'a') and
    # the lines reading residuals.
    assert a.backward.recompute_lines
    assert any("cos" in a.backward.lines[i] for i in a.backward.recompute_lines)
    assert a.flops["recompute"] > 0
    assert all(r.forward_lines and r.backward_lines for r in a.residuals)


def test_toggling_a_name_changes_what_is_saved():
    for spec in ("save_only_these_names('a')", "nothing_saveable"):
        a = remat_tui.analyze(make("nothing_saveable"), args=(X,), policy=spec)
        want = jax_saved_residuals(make("nothing_saveable"), spec, (X,), {})
        assert [r.text for r in a.residuals] == want


@pytest.mark.skipif(not REMAT3, reason="runs in the remat3 session (JAX_REMAT3=1)")
def test_the_remat3_session_really_runs_remat3():
    assert jc.remat3_enabled()
    primal = jax.make_jaxpr(make("nothing_saveable"))(X)
    (remat,) = [e for e, _ in jc.nested_eqns(jc.open_jaxpr(primal)) if jc.is_remat(e)]
    assert "RematTraced" in str(primal)
    assert jc.remat_policy(remat) is None  # remat3 stores nothing_saveable as None
    assert "CheckpointName" in str(primal)


@pytest.mark.skipif(REMAT3, reason="the plain sessions run remat2")
def test_the_plain_sessions_run_remat2():
    assert not jc.remat3_enabled()
    assert "RematTraced" not in str(jax.make_jaxpr(make("nothing_saveable"))(X))
