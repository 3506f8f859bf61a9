"""Live, the widget's requests: a new configuration is traced in a thread while
the caller goes on, a request superseded before its trace ends is never
shown, and a configuration seen before answers at once from the cache. The
widget's own behaviour in a kernel is in test_notebook.py."""

import threading

import jax.numpy as jnp

from remat_tui.core.setup.config import Config
from remat_tui.core.trace.configured import as_target
from remat_tui.notebook.live import Live


def test_requests_never_block_and_superseded_answers_are_never_shown():
    entered, gate = threading.Event(), threading.Event()
    calls = []

    def fn(x):
        calls.append(threading.current_thread().name)
        if len(calls) == 1:  # the first trace waits, in its thread, until released
            entered.set()
            assert gate.wait(60)
        return jnp.sin(jnp.sin(x))

    answers, errors = [], []
    live = Live(
        as_target(fn, (jnp.ones(3),), None),
        render=lambda a: f"<p>{a.policy}</p>",
        on_answer=answers.append,
        on_error=lambda config, message: errors.append(message),
    )
    first, second = Config.make("as_written"), Config.make("nothing_saveable")
    assert live.request(first) is None  # returned at once: the trace runs in a thread
    assert entered.wait(60) and live.busy  # ... now held at the gate
    assert live.request(second) is None
    assert live.wait(60)
    assert [a.config for a in answers] == [second] and not errors
    assert answers[0].html == "<p>nothing_saveable</p>" and not answers[0].cached
    gate.set()
    for thread in live.threads:
        thread.join(60)
    assert [a.config for a in answers] == [second]  # the first never shown, even now

    shown = live.request(second)  # seen before: at once, on this thread
    assert shown is not None and shown.cached and answers[-1] is shown and not live.busy


def test_a_failing_configuration_reports_its_error():
    answers, errors = [], []
    live = Live(
        as_target(lambda x: jnp.sin(x), (jnp.ones(3, dtype=jnp.int32),), None),
        render=str,
        on_answer=answers.append,
        on_error=lambda config, message: errors.append((config, message)),
    )
    assert live.request(Config.make("as_written")) is None
    assert live.wait(60)
    assert answers == [] and len(errors) == 1 and "int32" in errors[0][1]


def _widget_or_skip():
    """The widget, or a skip where the notebook extra (anywidget) is missing;
    any other import error is a failure, never a skip."""
    import pytest

    pytest.importorskip("anywidget", reason="the widget needs the notebook extra")
    from remat_tui.notebook.widget import widget

    return widget


def test_widget_names_compose_a_policy_and_a_seen_switch_is_instant():
    from conftest import jax_saved_residuals

    args = F4_ARGS
    w = _f4_widget()
    assert w.analysis is not None and w.names == ["a", "b", "c"] and w.name_states == {}
    w.name_states = {"a": "save", "b": "offload", "c": "recompute"}
    composed = (
        "save_and_offload_only_these_names(names_which_can_be_saved=['a'], "
        "names_which_can_be_offloaded=['b'], offload_src='device', offload_dst='pinned_host')"
    )
    assert w.policy == composed
    assert w.wait(120) and not w.error
    expected = jax_saved_residuals(f4, composed, args, {})
    assert [r.text for r in w.analysis.residuals] == expected
    assert any("<host>" in line for line in expected)

    w.policy = "as_written"  # seen at the start: answered before the assignment returns
    assert not w.busy and w.status.endswith("from the cache") and w.name_states == {}
    assert [r.text for r in w.analysis.residuals] == jax_saved_residuals(f4, "as_written", args, {})


def f4(W1, W2, W3, x):
    """The reference notebook's f4: three named values, one per layer."""
    from jax.ad_checkpoint import checkpoint_name

    x = checkpoint_name(jnp.sin(jnp.dot(W1, x)), name="a")
    x = checkpoint_name(jnp.sin(jnp.dot(W2, x)), name="b")
    return checkpoint_name(jnp.sin(jnp.dot(W3, x)), name="c")


F4_ARGS = (jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4))


def _f4_widget():
    return _widget_or_skip()(f4, *F4_ARGS)


def test_widget_refuses_a_bad_spec_and_keeps_its_last_good_state():
    w = _f4_widget()
    w.policy = "dots_saveable"
    assert w.wait(120) and not w.error
    shown = w.analysis
    w.policy = "dots_saveabl"  # typed, misspelt
    assert "dots_saveabl" in w.error
    assert w.policy == "dots_saveable"  # the picker and w.policy keep the last good spec
    assert "dots_saveabl" not in w.policy_choices
    assert w.analysis is shown and not w.busy
    w.device = "cpu:99"  # no such device: refused the same way
    assert w.error and w.device == w.device_choices[0] and w.analysis is shown


def test_widget_names_compose_only_the_functions_own_names():
    """A typed spec naming a name the function does not define is analysed
    (with the analysis's warning), but the next toggle composes only the
    function's own names; a toggle state naming another one is refused."""
    w = _f4_widget()
    w.policy = "save_only_these_names('zzz')"
    assert w.wait(120) and not w.error
    assert any("zzz" in warning for warning in w.analysis.warnings)
    assert w.name_states == {"a": "recompute", "b": "recompute", "c": "recompute"}
    w.name_states = {**w.name_states, "c": "save"}  # what clicking c sends
    assert w.policy == "save_only_these_names('c')"
    assert w.wait(120) and not w.error
    w.name_states = {"zzz": "save"}
    assert "zzz" in w.error and w.policy == "save_only_these_names('c')"
    assert w.name_states == {"a": "recompute", "b": "recompute", "c": "save"}


def test_a_trace_that_ends_before_the_request_returns_leaves_the_widget_not_busy(monkeypatch):
    """A thread may answer before the widget's request returns (a loaded
    machine switches threads there): busy was set after the request and
    stayed on with the answer shown."""
    import threading

    from remat_tui.notebook import live

    class AtOnce(threading.Thread):
        def start(self) -> None:  # the thread's whole run before start returns
            super().start()
            self.join()

    w = _f4_widget()
    monkeypatch.setattr(live.threading, "Thread", AtOnce)
    w.policy = "dots_saveable"
    assert w.analysis.policy == "dots_saveable"
    assert not w.busy and not w.error and "traced in" in w.status


def test_widget_names_toggle_keeps_the_other_half_of_save_from_both_policies():
    """At save_from_both_policies(dots_saveable, save_only_these_names('a')),
    the names read that half, and a toggle changes only it: dots_saveable
    stays (it was dropped, the whole policy replaced by a names policy).
    JAX's residuals under the policy written out are the oracle."""
    from conftest import jax_saved_residuals

    w = _f4_widget()
    w.policy = "save_from_both_policies(dots_saveable, save_only_these_names('a'))"
    assert w.wait(120) and not w.error
    assert w.name_states == {"a": "save", "b": "recompute", "c": "recompute"}
    w.name_states = {**w.name_states, "b": "save"}
    want = "save_from_both_policies(dots_saveable, save_only_these_names('a', 'b'))"
    assert w.policy == want
    assert w.wait(120) and not w.error
    assert [r.text for r in w.analysis.residuals] == jax_saved_residuals(f4, want, F4_ARGS, {})
