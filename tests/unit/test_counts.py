"""Counts agree with their nouns wherever a view says how many: `fit`
printed "1 configurations"."""

from types import SimpleNamespace

import jax.numpy as jnp

import remat_tui
from remat_tui.core.units import count
from remat_tui.report import fit as fit_report
from remat_tui.report import render
from remat_tui.report.comparisons import render_compare


def test_count_agrees_with_its_noun():
    assert count(1, "configuration") == "1 configuration"
    assert count(0, "configuration") == "0 configurations"
    assert count(2, "batch", "batches") == "2 batches"
    assert count(1, "batch", "batches") == "1 batch"


def test_fit_says_one_configuration_one_batch_one_program():
    row = SimpleNamespace(probes=[object()])
    fit = SimpleNamespace(
        rows=[row], compiles=1, reused=0, seconds=1.0, cancelled=False, optimized=False
    )
    assert fit_report.searched(fit).startswith(
        "1 configuration, 1 batch tried, 1 program compiled, "
    )


def f(x):
    return jnp.sum(jnp.sin(x))


def test_one_row_and_one_residual_read_as_one():
    c = remat_tui.compare(f, args=(jnp.ones(3),), policies=["nothing_saveable"])
    assert "(1 configuration, " in render_compare(c, "text")
    a = remat_tui.analyze(f, args=(jnp.ones(3),), policy="as_written")
    assert a.totals.count == 1 and "1 residual ·" in render(a, "text")
