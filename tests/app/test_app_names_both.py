"""A names toggle where the policy is `save_from_both_policies(<a policy>,
<a names policy>)` reads and changes the names half only: the Names list
shows what that half saves, and space keeps the other half. The residuals
under each policy the toggles make are JAX's own (print_saved_residuals)
under the same policy written by hand."""

import contextlib
import io

import jax
import jax.ad_checkpoint
from test_app import SIZE, name_marks, settle

from remat_tui.app.main import RematApp
from remat_tui.core.setup.loading import resolve_arguments

cp = jax.checkpoint_policies

# `loss` under an outer policy; `checkpointed` the same under
# jax.checkpoint(block, policy=POLICY) in the code: a factory of the policy,
# so the test writes each policy the toggles make by hand.
MODEL = """
import jax, jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
import remat_tui

cp = jax.checkpoint_policies


def block(x, w1, w2):
    a = checkpoint_name(jnp.sin(x @ w1), "attn")
    h = checkpoint_name(jnp.tanh(a @ w2), "mlp")
    return jnp.cos(h)


def args():
    return jnp.ones((8, 16)), jnp.ones((16, 16)), jnp.ones((16, 16))


@remat_tui.target(args=args)
def loss(x, w1, w2):
    return jnp.sum(block(x, w1, w2))


def make(policy):
    def checkpointed(x, w1, w2):
        return jnp.sum(jax.checkpoint(block, policy=policy)(x, w1, w2))

    return checkpointed


checkpointed = remat_tui.target(args=args, name="checkpointed")(
    make(cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("attn")))
)
"""

BOTH_ATTN = "save_from_both_policies(dots_saveable, save_only_these_names('attn'))"


def jax_residuals(fn, target) -> list[str]:
    args, kwargs = resolve_arguments(target)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        jax.ad_checkpoint.print_saved_residuals(fn, *args, **kwargs)
    return out.getvalue().splitlines()


def shown_residuals(app) -> list[str]:
    return [r.text for r in app.loaded.shown.residuals]


def both(*names):
    """save_from_both_policies(dots_saveable, save_only_these_names(*names)), by hand."""
    return cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names(*names))


async def test_a_names_toggle_at_an_outer_save_from_both_keeps_its_other_half(write_target):
    app = RematApp(write_target(MODEL), "loss", policy=BOTH_ATTN, show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert name_marks(app) == {"attn": "S", "mlp": "R"}  # the names half, read
        steps = [
            ("mlp", "save_only_these_names('attn', 'mlp')", ("attn", "mlp")),
            # offload: JAX refuses it inside save_from_both_policies, so the cycle
            # skips it there
            ("mlp", "save_only_these_names('attn')", ("attn",)),
            ("attn", "save_only_these_names()", ()),
            ("attn", "save_only_these_names('attn')", ("attn",)),
        ]
        for name, names_half, saved in steps:
            app.asking.cycle_name(name)
            await settle(app, pilot)
            spec = app.wanted.config.spec.canonical
            assert spec == f"save_from_both_policies(dots_saveable, {names_half})"
            assert app.loaded.shown.config.spec.canonical == spec
            assert name_marks(app) == {n: "S" if n in saved else "R" for n in ("attn", "mlp")}
            hand = jax.checkpoint(app.loaded.target.fn, policy=both(*saved))
            assert shown_residuals(app) == jax_residuals(hand, app.loaded.target)


async def test_a_names_toggle_at_a_site_with_save_from_both_keeps_its_other_half(write_target):
    app = RematApp(write_target(MODEL), "checkpointed", show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert name_marks(app) == {"attn": "S", "mlp": "R"}  # read from the code's policy
        app.asking.cycle_name("mlp")
        await settle(app, pilot)
        (spec,) = dict(app.wanted.config.site_specs).values()
        assert spec.canonical == (
            "save_from_both_policies(dots_saveable, save_only_these_names('attn', 'mlp'))"
        )
        assert name_marks(app) == {"attn": "S", "mlp": "S"}
        hand = app.loaded.target.fn.__globals__["make"](both("attn", "mlp"))
        assert shown_residuals(app) == jax_residuals(hand, app.loaded.target)
