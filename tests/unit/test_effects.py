"""Issue 43, effects under a checkpoint seen before anything runs: a call
back to Python that the configuration recomputes gets a note in the report
(text, JSON) and in the story of the residuals it is recomputed from; one
whose output the policy saves does not. The oracles: the callback's line is
the one JAX's jaxpr gives its equation (`source_info_util.summarize`), and
whether the callback's output is saved is JAX's `saved_residuals`, both read
at test time."""

import os

import jax
import jax.numpy as jnp
import pytest
from conftest import ROOT
from jax._src import source_info_util
from jax._src.ad_checkpoint import saved_residuals

import remat_tui
from remat_tui.report import html, markdown, text

NOISY = os.path.join(ROOT, "tests", "models", "stateful_noise.py")


def noisy():
    target = remat_tui.load_targets(NOISY)["loss"]
    return target, target.fn.__globals__


def _eqns(jaxpr):
    for eqn in jaxpr.eqns:
        yield eqn
        for p in eqn.params.values():
            for sub in p if isinstance(p, tuple | list) else (p,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _eqns(inner)


def jax_callback_line(fn, args, primitive):
    """`file.py:N` of the `primitive` equation in JAX's jaxpr of `fn`."""
    eqn = next(e for e in _eqns(jax.make_jaxpr(fn)(*args).jaxpr) if e.primitive.name == primitive)
    return _line(eqn)  # from JAX's 'path:line:col (function)'


def jax_runs(fn, args, primitive, where):
    """How many times JAX's own gradient program runs the `primitive` at
    `where`: twice where its backward pass recomputes it."""
    eqns = _eqns(jax.make_jaxpr(jax.grad(fn))(*args).jaxpr)
    return sum(1 for e in eqns if e.primitive.name == primitive and _line(e) == where)


def _line(eqn):
    path, line = source_info_util.summarize(eqn.source_info).split(" ")[0].rsplit(":", 2)[:2]
    return f"{os.path.basename(path)}:{line}"


def checkpointed(module, policy):
    fn = module["loss_under"](None)
    return jax.checkpoint(fn, policy=getattr(jax.checkpoint_policies, policy))


@pytest.fixture(scope="module")
def noisy_line():
    target, module = noisy()
    return jax_callback_line(module["loss_under"](None), target.args(), "pure_callback")


def test_a_recomputed_callback_is_noted_in_the_report_and_its_residuals_stories(noisy_line):
    target, module = noisy()
    assert jax_runs(checkpointed(module, "nothing_saveable"), target.args(), "pure_callback",
                    noisy_line) == 2  # fmt: skip
    a = remat_tui.analyze(target, policy="nothing_saveable")
    effects = a.to_dict()["effects"]
    assert effects == [{"kind": "pure_callback", "where": noisy_line, "ordered": False,
                        "reruns": True}]  # fmt: skip
    said = text.render(a)
    note = f"pure_callback at {noisy_line} runs again in the backward pass"
    assert note in said and note in markdown.render(a) and note in html.render(a)
    # the story of each residual it is recomputed from says it, and only those
    stories = [r.story.to_dict()["runs_again"] for r in a.residuals]
    assert [f"pure_callback at {noisy_line}"] in stories
    assert "recomputation runs them again" in said


def test_a_callback_whose_output_is_saved_runs_once_and_gets_no_note(noisy_line):
    target, module = noisy()
    args = target.args()
    fn = checkpointed(module, "everything_saveable")
    # JAX saves what the block computes from the callback's output, and its
    # gradient program runs the callback once
    saved = saved_residuals(fn, *args)
    assert any("(block)" in why for _, why in saved), saved
    assert jax_runs(fn, args, "pure_callback", noisy_line) == 1
    a = remat_tui.analyze(target, policy="everything_saveable")
    assert a.to_dict()["effects"] == [{"kind": "pure_callback", "where": noisy_line,
                                       "ordered": False, "reruns": False}]  # fmt: skip
    said = text.render(a) + markdown.render(a) + html.render(a)
    assert "runs again" not in said
    assert all(not r.story.runs_again for r in a.residuals)


def _printing_block(h):
    jax.debug.callback(lambda v: None, h, ordered=True)
    return jnp.sin(jnp.sin(h))


def _printing_loss(w, x):
    return jnp.sum(jax.checkpoint(_printing_block)(x @ w))


def test_an_ordered_debug_callback_in_a_checkpoint_is_noted_as_ordered():
    args = (jnp.ones((4, 4)), jnp.ones((2, 4)))
    line = jax_callback_line(_printing_loss, args, "debug_callback")
    assert jax_runs(_printing_loss, args, "debug_callback", line) == 2
    a = remat_tui.analyze(_printing_loss, args)
    assert a.to_dict()["effects"] == [{"kind": "debug_callback", "where": line,
                                       "ordered": True, "reruns": True}]  # fmt: skip
    said = text.render(a)
    assert f"debug_callback at {line} runs again in the backward pass" in said
    assert "an ordered effect" in said
    assert any(r.story.runs_again == (f"debug_callback at {line}",) for r in a.residuals)


def test_jax_refuses_an_io_callback_under_a_checkpoint():
    """No io_callback is ever recomputed: JAX's partial evaluation of a
    checkpoint refuses its effect, so there is nothing to note (the oracle
    that the note needs no io_callback case)."""
    from jax.experimental import io_callback

    def block(h):
        out = jax.ShapeDtypeStruct(h.shape, h.dtype)
        return jnp.sin(h) * io_callback(lambda v: v, out, jax.lax.stop_gradient(h))

    with pytest.raises(NotImplementedError, match="Effects not supported"):
        jax.grad(lambda x: jnp.sum(jax.checkpoint(block)(x)))(jnp.ones(3))


def test_a_random_key_from_python_state_is_read_once_while_tracing_and_never_runs_again():
    """A `jax.random` key made from a Python counter is read while JAX traces
    the function: a constant in the jaxpr, which recomputation reuses. The
    oracle: JAX's gradients under nothing_saveable are bitwise those of the
    code as written, the counter reset before each; and there is no effect
    to note."""
    import numpy as np

    counter = [0]

    def block(h):
        counter[0] += 1  # Python state, read while tracing
        noise = jax.random.normal(jax.random.key(counter[0]), h.shape)
        return jnp.tanh(h + noise + np.float32(np.random.default_rng(counter[0]).normal()))

    def loss_under(policy):
        inner = block if policy is None else jax.checkpoint(block, policy=policy)
        return lambda w, x: jnp.sum(inner(x @ w) ** 2)

    args = (jnp.ones((4, 4)) / 4, jnp.ones((2, 4)))
    grads = {}
    for label, policy in (
        ("as_written", None),
        ("nothing", jax.checkpoint_policies.nothing_saveable),
    ):
        counter[0] = 0
        grads[label] = np.asarray(jax.jit(jax.grad(loss_under(policy)))(*args))
    np.testing.assert_array_equal(grads["nothing"], grads["as_written"])
    counter[0] = 0
    a = remat_tui.analyze(loss_under(None), args, policy="nothing_saveable")
    assert a.to_dict()["effects"] == [] and "runs again" not in text.render(a)


def test_compare_and_suggest_rows_say_the_callback_they_run_again(noisy_line):
    """A row of compare or suggest (made without the panes) carries the note
    and the JSON `effects` the configuration's own analysis gives: under
    nothing_saveable JAX's gradient program runs the callback twice and the
    row says so; under everything_saveable once, and the row says nothing."""
    from remat_tui.core.search.compare import compare
    from remat_tui.core.search.suggest.pipeline import suggest
    from remat_tui.report.comparisons import render_compare

    target, module = noisy()
    note = f"pure_callback at {noisy_line} runs again in the backward pass"
    c = compare(target, policies=["nothing_saveable", "everything_saveable"])
    rows = {r.config.policy: r for r in c.rows}
    for policy, runs in (("nothing_saveable", 2), ("everything_saveable", 1)):
        assert jax_runs(checkpointed(module, policy), target.args(), "pure_callback",
                        noisy_line) == runs  # fmt: skip
        by_itself = remat_tui.analyze(target, policy=policy)
        row = rows[policy].to_dict()
        assert row["effects"] == by_itself.to_dict()["effects"]
        assert row["effects"][0]["reruns"] is (runs == 2)
        assert any(note in n for n in row["notes"]) is (runs == 2)
    said = render_compare(c, "text")
    assert "↻" in said and note in said
    assert "↻" in render_compare(c, "md")
    # suggest's rows are made as compare's: the same note on the same configuration
    s = suggest(target, budget=10**9)
    for row in s.rows:
        if row.config.policy == "nothing_saveable" and not row.config.sites:
            assert row.reruns_callbacks == [f"pure_callback at {noisy_line}"]
            assert any(note in n for n in row.notes)
    assert not s.baseline.reruns_callbacks and not any(note in n for n in s.baseline.notes)


def test_a_row_traces_the_backward_pass_only_for_a_program_that_calls_back():
    """A row of a model with no call back to Python is read from the linear
    program as before (no backward pass traced: its backward FLOPs unknown);
    a row of one that calls back has its backward pass traced, which says
    which calls it runs again."""
    from remat_tui.core.setup.config import Config
    from remat_tui.core.trace.analysis import row_view
    from remat_tui.core.trace.configured import as_target
    from remat_tui.core.trace.traced import trace_config

    def loss(w, x):
        return jnp.sum(jnp.sin(jnp.sin(x @ w)))

    plain = as_target(loss, (jnp.ones((4, 4)), jnp.ones((2, 4))), None)
    config = Config.make("nothing_saveable")
    a = row_view(trace_config(plain, config))
    assert a.flops["backward"] is None and a.effects == []
    target, _ = noisy()
    b = row_view(trace_config(target, config))
    assert b.flops["backward"] is not None and [e.reruns for e in b.effects] == [True]
