"""Issue 43's key in the app: `a` verifies the configuration shown against
the code as written on its device, in a worker, and says the verdict above
the panes. The oracle: `remat_tui.verify` of the same configuration, run in
the test on a target loaded afresh (its own run of the code as written), and
for the stateful callback model, the gradients JAX's `jax.grad` gives under
the policy against those of the code as written."""

import os

import jax
import numpy as np
import pytest
from conftest import ROOT, example, wait_for
from test_app import SIZE, settle

import remat_tui
from remat_tui.app.main import RematApp
from remat_tui.report.verify import brief_lines

NOISY = os.path.join(ROOT, "tests", "models", "stateful_noise.py")


def verdict(app) -> str | None:
    return app.view.verdict_text


async def press_a_until_verified(app, pilot):
    """`a`, then wait until its verdict (or failure) is in."""
    key = app.scene().key_of(app.loaded.shown)
    await pilot.press("a")
    await wait_for(
        pilot,
        lambda: key in app.verifying.known or key in app.verifying.failures,
        "the verify",
        timeout=240,
    )
    await pilot.pause()
    return key


async def test_a_verifies_the_configuration_shown_and_says_the_verdict_in_place():
    app = RematApp(example("mlp.py"), policy="nothing_saveable", show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert verdict(app) is None  # nothing said until a
        key = await press_a_until_verified(app, pilot)
        shown = app.verifying.known[key]
        # the oracle: the API's verify of the same configuration, on a target of its own
        target = remat_tui.load_targets(example("mlp.py"))[app.loaded.target.name]
        oracle = remat_tui.verify(target, policy="nothing_saveable", device=app.wanted.device)
        assert shown.verdict == oracle.verdict and shown.ok
        assert [(x.path, x.bitwise) for x in shown.leaves] == [
            (x.path, x.bitwise) for x in oracle.leaves
        ]
        said = verdict(app)
        assert said == "\n".join(brief_lines(shown))
        n = len(oracle.leaves)
        assert f"{oracle.bitwise_leaves} of {n} leaves bitwise equal" in said
        assert "gradients agree" in said and "nothing_saveable" in said
        # Another configuration shown: the verdict is marked stale, not taken for its own.
        await pilot.press("1")
        await settle(app, pilot)
        assert app.wanted.config != shown_config(key)
        assert verdict(app).startswith("stale, verified for policy nothing_saveable")
        # back to it: its own verdict again, from the cache
        await pilot.press("2")
        await settle(app, pilot)
        assert verdict(app) == said


def shown_config(key):
    return key[1]


async def test_a_on_a_recomputed_callback_says_the_gradients_differ_and_names_the_leaf():
    app = RematApp(NOISY, "loss", policy="nothing_saveable", show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        key = await press_a_until_verified(app, pilot)
        shown = app.verifying.known[key]
        # JAX as the oracle: the gradients under nothing_saveable are not the
        # code as written's (the callback runs again in the backward pass)
        module = app.loaded.target.fn.__globals__
        args = module["example_args"]()
        grads = {
            policy: jax.jit(jax.grad(module["loss_under"](policy)))(*args)
            for policy in (None, jax.checkpoint_policies.nothing_saveable)
        }
        moved = [
            name
            for name in ("W1", "W2")
            if not np.array_equal(
                grads[None][name], grads[jax.checkpoint_policies.nothing_saveable][name]
            )
        ]
        assert moved
        assert shown.verdict == "differ"
        oracle = remat_tui.verify(remat_tui.load_targets(NOISY)["loss"], policy="nothing_saveable")
        differing = {leaf.path for leaf in shown.differing}
        assert oracle.verdict == "differ" and {x.path for x in oracle.differing} == differing
        assert {f"params['{name}']" for name in moved} <= differing
        said = verdict(app)
        assert "gradients differ" in said
        assert app.query_one("#verdict").has_class("-differ")
        worst = max(shown.differing, key=lambda leaf: leaf.max_abs / leaf.tolerance)
        assert f"worst {worst.path}" in said
        assert "culprit: " in said and "runs again in the backward pass" in said
        # the analysis shown stays as it was
        assert app.loaded.shown.config == key[1]


async def test_a_verify_that_fails_is_said_in_place_and_the_analysis_shown_stays(monkeypatch):
    from remat_tui.core.xla.verify import bisect as verify_bisect
    from remat_tui.errors import RematError

    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.loaded.shown

        def fails(*a, **k):
            raise RematError("the step raised when run for verify: boom")

        monkeypatch.setattr(verify_bisect, "verify_explained", fails)
        key = await press_a_until_verified(app, pilot)
        said = verdict(app)
        assert said.startswith("verify failed: the step raised when run for verify: boom")
        assert app.query_one("#verdict").has_class("-failed")
        assert app.loaded.shown is shown and key not in app.verifying.known


async def test_a_on_a_tpu_topology_says_it_needs_the_chip_and_claims_nothing():
    from test_app_tpu import TOPOLOGY, pick_device

    from remat_tui.core.setup import devices as devices_lib
    from remat_tui.errors import RematError

    try:
        devices_lib.resolve_device(TOPOLOGY)
    except RematError as exc:
        pytest.skip(f"no deviceless TPU here ({exc.message})")
    app = RematApp(example("mlp.py"), policy="nothing_saveable", show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pick_device(app, pilot, TOPOLOGY)
        shown = app.loaded.shown
        assert shown.config.device == TOPOLOGY
        key = await press_a_until_verified(app, pilot)
        oracle = remat_tui.verify(
            remat_tui.load_targets(example("mlp.py"))[app.loaded.target.name],
            policy="nothing_saveable",
            device=TOPOLOGY,
        )
        assert oracle.verdict == app.verifying.known[key].verdict == "not_run"
        said = verdict(app)
        assert said.startswith("verify: not run: ") and "needs the chip" in said
        assert app.loaded.shown is shown  # the analysis shown stays


async def test_a_again_cancels_the_verify_under_way(monkeypatch):
    """The core's `cancelled` turns true when `a` is pressed again: the
    worker stops at its next poll, and nothing is claimed."""
    import threading

    from remat_tui.core.trace.configured import Cancelled
    from remat_tui.core.xla.verify import bisect as verify_bisect

    asked, stopped = threading.Event(), threading.Event()

    def waits(target, config, cancelled, **kw):
        asked.set()
        while not cancelled():  # as the core polls between its compiles and runs
            threading.Event().wait(0.01)
        stopped.set()
        raise Cancelled()

    monkeypatch.setattr(verify_bisect, "verify_explained", waits)
    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("a")
        await wait_for(pilot, asked.is_set, "the verify to start")
        await pilot.pause()
        assert verdict(app).startswith("verify: running policy as_written")
        await pilot.press("a")
        await wait_for(pilot, stopped.is_set, "the verify to stop")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.verifying.running is None and not app.verifying.known
        assert verdict(app) is None
