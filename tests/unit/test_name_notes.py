"""A note on a saved name that spares (almost) no recompute speaks of the
user's own program: the operation that made the named value and the work
beneath it still re-run, with the user's lines, never functions the user did
not write (it once said "GELU's derivative reads its input" of a sin model)."""

import contextlib
import inspect
import io

import jax
import jax.numpy as jnp
import pytest
from jax.ad_checkpoint import checkpoint_name

import remat_tui
from remat_tui.core.search.notes.verdicts import name_verdicts
from remat_tui.core.setup.config import Config
from remat_tui.core.trace.configured import as_target


def g(W, x):
    y = jnp.dot(W, x)
    return jnp.sin(y)


def f4(W1, W2, W3, x):  # the seed's (JAX's remat notebook)
    x = checkpoint_name(g(W1, x), name="a")
    x = checkpoint_name(g(W2, x), name="b")
    x = checkpoint_name(g(W3, x), name="c")
    return x


def tanh_layers(W, x):
    h = checkpoint_name(jnp.tanh(x @ W), "h")
    return jnp.sum(jnp.tanh(h @ W))


@pytest.fixture(scope="module", autouse=True)
def _traced_here_first():
    """JAX keeps what it traced of its own jitted functions (jnp.dot's), the
    user's line included, for the process: after a module that traced the
    same code from another file (tests/unit/test_pane_highlights.py has `g`),
    the notes would name that file. This module's traces start afresh, as in
    a process of their own (one pytest-xdist worker runs many files)."""
    jax.clear_caches()


SEED_ARGS = (jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4))
TANH_ARGS = (jnp.ones((8, 8)), jnp.ones((4, 8)))


def line_of(fn, text: str) -> str:
    """`file.py:N` of the line of `fn` holding `text`, read from the source."""
    lines, first = inspect.getsourcelines(fn)
    offset = next(i for i, line in enumerate(lines) if text in line)
    return f"test_name_notes.py:{first + offset}"


def note_on(comparison, spec: str) -> str:
    row = next(r for r in comparison.rows if r.config.spec.canonical == spec)
    said = [n for n in row.notes if "spares" in n]
    assert len(said) == 1, row.notes
    return said[0]


@pytest.fixture(scope="module")
def seed_comparison():
    return remat_tui.compare(
        f4, args=SEED_ARGS, policies=["nothing_saveable", "save_only_these_names('a')"]
    )


def test_seed_note_names_sin_and_the_dot_beneath_it(seed_comparison):
    note = note_on(seed_comparison, "save_only_these_names('a')")
    assert "GELU" not in note and "tanh" not in note
    assert f"dot_general ({line_of(g, 'jnp.dot')})" in note
    assert f"sin ({line_of(g, 'jnp.sin')})" in note
    assert "sin's derivative (cos)" in note


def test_tanh_note_says_tanh_itself_is_re_run():
    c = remat_tui.compare(
        tanh_layers, args=TANH_ARGS, policies=["nothing_saveable", "save_only_these_names('h')"]
    )
    note = note_on(c, "save_only_these_names('h')")
    assert "GELU" not in note
    assert f"re-runs tanh ({line_of(tanh_layers, 'checkpoint_name')})" in note
    assert "tanh's output" in note


def test_names_list_verdicts_say_the_same():
    """The app's Names list (name_verdicts) words it from the same program."""
    target = as_target(f4, SEED_ARGS, None)
    said = name_verdicts(target, Config.make("nothing_saveable"), ["a"])
    assert "GELU" not in said["a"] and f"sin ({line_of(g, 'jnp.sin')})" in said["a"]


def dot_named(W, x):
    h = checkpoint_name(x @ W, "h")
    return jnp.sum(jnp.sin(h) @ W)


def test_a_verdict_under_save_from_both_policies_keeps_the_other_half():
    """Under save_from_both_policies(dots_saveable, ...) the named value (a
    dot's output) is saved by dots_saveable already: saving 'h' as well
    spares nothing, and the verdict says so. Weighed against names alone
    (the whole policy replaced), it spared the dot's recompute. JAX's
    residuals are the oracle of the premise."""
    target = as_target(dot_named, TANH_ARGS, None)
    cp = jax.checkpoint_policies
    both = cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names())
    with_h = cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("h"))

    def saved(policy):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            jax.ad_checkpoint.print_saved_residuals(
                jax.checkpoint(dot_named, policy=policy), *TANH_ARGS
            )
        return len(out.getvalue().splitlines())

    assert saved(both) == saved(with_h)  # the premise: saving h adds nothing under dots
    config = Config.make("save_from_both_policies(dots_saveable, save_only_these_names())")
    assert "h" in name_verdicts(target, config, ["h"])
    assert "h" not in name_verdicts(target, Config.make("nothing_saveable"), ["h"])
