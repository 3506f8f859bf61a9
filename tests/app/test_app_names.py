"""The Names list marks a checkpoint_name whose saving spares no recompute (⊘),
and the note says why once it is saved; the marks are what the analyses of
the same code say (core/search/notes/verdicts.py, checked against compare there)."""

from test_app import SIZE, name_marks, settle

from remat_tui.app.main import RematApp
from remat_tui.app.widgets.sidebar import SPARES_NONE

GELU = """
import jax, jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
import remat_tui

def block(x, w1, w2):
    h = checkpoint_name(x @ w1, "h")
    y = checkpoint_name(jax.nn.gelu(h), "gelu_out")
    return checkpoint_name(y @ w2, "out")

def args():
    return jnp.ones((64, 256)), jnp.ones((256, 1024)), jnp.ones((1024, 256))

@remat_tui.target(args=args)
def loss(x, w1, w2):
    nothing = jax.checkpoint_policies.nothing_saveable
    return jnp.sum(jax.checkpoint(block, policy=nothing)(x, w1, w2))
"""


def names_shown(app) -> dict[str, str]:
    names = app.query_one("#names")
    return {
        names.get_option_at_index(i).id: str(names.get_option_at_index(i).prompt)
        for i in range(names.option_count)
    }


async def test_names_that_spare_no_recompute_are_marked_and_explained(write_target):
    app = RematApp(write_target(GELU), "loss")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = names_shown(app)
        assert SPARES_NONE in shown["gelu_out"] and SPARES_NONE in shown["out"]
        assert SPARES_NONE not in shown["h"]
        assert SPARES_NONE in str(app.query_one("#names").border_subtitle)
        assert "saving 'gelu_out'" not in str(app.query_one("#error").render())
        app.asking.cycle_name("gelu_out")  # recompute -> save, at the block's sites
        await settle(app, pilot)
        assert name_marks(app)["gelu_out"] == "S"
        error = app.query_one("#error")
        assert error.display and "saving 'gelu_out' spares" in str(error.render())
        # the work beneath the name, in the target's own words (its dot, line 7)
        assert "still re-runs" in str(error.render())
        assert "dot_general (target.py:7)" in str(error.render())


async def test_the_names_wait_while_a_trace_the_user_asked_for_runs(write_target):
    """Judging names is background work: it never starts while a new policy is
    being traced, and the work under way is told to stop (it would share the
    CPU with the trace the user waits for)."""
    app = RematApp(write_target(GELU), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        judged_while_pending = []
        judge = app.name_judge.judge

        def judging(*args):
            judged_while_pending.append(app.analyses.pending is not None)
            return judge(*args)

        paused = []
        pause = app.name_judge.pause

        def pausing():
            paused.append(app.analyses.pending is not None)
            return pause()

        app.name_judge.judge, app.name_judge.pause = judging, pausing
        await pilot.press("2")  # nothing_saveable: never traced yet
        await settle(app, pilot)
        assert paused == [True]  # the work under way told to stop when the trace began
        assert judged_while_pending and not any(judged_while_pending)
        assert app.name_judge.wanted is not None  # judged again once shown


async def test_a_function_without_names_says_so_in_the_names_list():
    """Not an empty box: one line says the code names nothing, and space says
    so too (the line is not a name to cycle)."""
    from conftest import example

    from remat_tui.app.widgets.sidebar import NO_NAMES

    app = RematApp(example("notebook.py"), "f2", show_timings=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        assert not app.loaded.shown.names  # f2 calls no checkpoint_name
        names = app.query_one("#names")
        assert [str(names.get_option_at_index(i).prompt) for i in range(names.option_count)] == [
            NO_NAMES
        ]
        config = app.wanted.config
        await pilot.press("space")
        await settle(app, pilot)
        assert app.wanted.config == config
        assert any("defines no checkpoint_name" in n.message for n in app._notifications)
