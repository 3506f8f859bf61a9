"""1,000 random policy, name, site and device changes, by keyboard, each sent as
soon as the app has taken the key before (never waiting for a trace), then: the
app is alive, not one key was lost, it shows the analysis of the last request
(JAX's own residuals for that outer policy, site policy and device), its cache
is bounded, RSS at the end is within 10% of its level after the first 100
changes, and the worst gap between frames is printed (a sanity bound only).

Slow (about 20 s on a 2-core machine): each key is drawn, and the app traces the
first request of each burst of keys and the last (app/controllers/analyses.py).
"""

import random
import resource
import time

import jax
import pytest
from conftest import example, jax_saved_residuals
from test_app import listed_policies, settle
from textual import events

from remat_tui.app.controllers import analyses as analysis_cache
from remat_tui.app.main import RematApp
from remat_tui.core.setup import policies
from remat_tui.core.setup.loading import resolve_arguments

CHANGES = 1_000
WARM = 100  # changes before RSS is taken as the level to hold
SEED = 8
SIZE = (120, 36)  # the full layout (the sidebar narrows below 120 columns)
CHARS = {"space": " ", "enter": "\r"}


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def oracle(app, config) -> list[str]:
    """print_saved_residuals of the example with the block's policy edited in by
    hand (or its jax.checkpoint deleted, for as_written), under the outer
    policy, on the configuration's device."""
    module = app.loaded.target.fn.__globals__
    site = app.loaded.shown.sites[0]
    overrides = config.site_overrides
    at_site = overrides.get(site.id, overrides.get(site.function, site.policy))
    if at_site == policies.AS_WRITTEN:  # the checkpoint removed from the line
        fn = module["scanned"]
    else:
        fn = module["make_scanned_checkpointed"](policies.build(policies.parse(at_site)))
    args, kwargs = resolve_arguments(app.loaded.target)
    device = jax.devices()[int(config.device.split(":")[1])]
    with jax.default_device(device):
        return jax_saved_residuals(fn, config.policy, args, kwargs)


def random_change(rng: random.Random, specs: list[str], devices: list[str]):
    """(kind, keys, what it sets) for one change a user could make by keyboard."""
    kind = rng.choice(["policy", "name", "site", "device"])
    if kind == "policy":
        i = rng.randrange(len(specs))
        return kind, ["r", str(i)], specs[i]
    if kind == "name":
        moves = [rng.choice(["up", "down"]) for _ in range(rng.randrange(3))]
        return kind, ["n", *moves, "space"], None
    if kind == "site":
        if rng.random() < 0.5:
            i = rng.randrange(len(specs))
            return kind, ["s", str(i)], specs[i]
        return kind, ["s", "space"], None
    j = rng.randrange(len(devices))
    return kind, ["d", "home", *["down"] * j, "enter"], devices[j]


def queues_empty(app) -> bool:
    pumps = [app, *app.screen.walk_children(with_self=True)]
    return all(pump._message_queue.empty() for pump in pumps)


async def fire(app, pilot, keys: list[str]) -> None:
    """Send keys as fast as the app takes them: each once the one before has been
    handled, by every widget it reached, never waiting for the app to go idle
    (Pilot.press does: for each trace, up to a second). Sooner would be faster
    than Textual can take keys: it forwards a key to the widget focused when
    the key arrives, before the key ahead of it (say `n`, which moves the
    focus) has been handled."""
    for key in keys:
        event = events.Key(key, CHARS.get(key, key if len(key) == 1 else None))
        event.set_sender(app)
        app.post_message(event)
        await pilot._wait_for_screen()
        while not queues_empty(app):
            await pilot._wait_for_screen()


def end_of(changes, outer: str, device: str, requests: int) -> tuple[str, str, int]:
    """(outer policy, device, request count) once every change is made."""
    for kind, _, value in changes:
        if kind == "policy":
            outer = value
        if kind != "device" or value != device:  # the same device again asks nothing
            requests += 1
        if kind == "device":
            device = value
    return outer, device, requests


def assert_ends_on_the_last_request(app, changes, outer: str, device: str, requests: int):
    """Not one key lost, and what is shown is the last request's analysis, as JAX
    lists its residuals."""
    assert app.is_running and app.analyses.request == requests
    shown = app.loaded.shown.config
    assert shown == app.wanted.key(app.loaded.reloads)[1]  # the last request, not an older one
    assert (shown.policy, shown.device) == (outer, device)
    kind, keys, value = changes[-1]
    if kind == "site" and value is not None:
        assert shown.site_overrides.get(app.loaded.shown.sites[0].id) == value
    assert [r.text for r in app.loaded.shown.residuals] == oracle(app, shown)
    error = app.query_one("#error")  # a caution about the shown analysis at most
    assert not error.display or error.has_class("-warning"), error.render()


@pytest.mark.stress  # minutes, not seconds: opt in with -m stress (see the docstring)
async def test_a_thousand_changes_end_on_the_last_request():
    app = RematApp(example("transformer.py"), "scanned_checkpointed")
    frames: list[float] = []
    display = app._display

    def timed_display(screen, renderable):  # every frame written (a no-op headless)
        display(screen, renderable)
        frames.append(time.perf_counter())

    app._display = timed_display
    rng = random.Random(SEED)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        specs = listed_policies(app)
        # The four CPU devices, listed first (TPU topologies, when offered, follow).
        devices = [d for d in app.loaded.devices if d.startswith("cpu:")]
        assert (
            devices == list(app.loaded.devices[:4]) == [f"cpu:{i}" for i in range(4)]
            and app.loaded.shown.sites
        )
        rss_before = rss_mib()
        changes = [random_change(rng, specs, devices) for _ in range(CHANGES)]
        expected = end_of(changes, app.loaded.shown.policy, app.wanted.device, app.analyses.request)
        start = time.perf_counter()
        # The frames written while keys are fired, in two runs: the settle after
        # WARM changes waits for a trace with nothing to draw but the spinner,
        # so its frames are no measure of how the app answers keys.
        runs = [len(frames)]
        for index, (_, keys, _) in enumerate(changes):
            if index == WARM:  # the caches full: memory from here on must be freed
                runs.append(len(frames))
                await settle(app, pilot)
                rss_warm = rss_mib()
                runs.append(len(frames))
            await fire(app, pilot, keys)
        firing = time.perf_counter() - start
        runs.append(len(frames))
        stamps = [frames[a:b] for a, b in zip(runs[::2], runs[1::2], strict=True)]
        await settle(app, pilot)
        total = time.perf_counter() - start
        rss_after = rss_mib()

        assert_ends_on_the_last_request(app, changes, *expected)
        limit = analysis_cache.LIMIT
        assert len(app.analyses.cache) <= limit and len(app.analyses.drawings) <= limit
        assert set(app.analyses.drawings) <= {id(a) for a in app.analyses.cache.values()}

    gaps = [b - a for run in stamps for a, b in zip(run, run[1:], strict=False)]
    worst = max(gaps, default=0.0)
    print(
        f"\n{CHANGES} changes ({app.analyses.request} requests): keys fired in {firing:.1f} s, "
        f"settled at {total:.1f} s; {len(gaps) + len(stamps)} frames, worst gap between frames "
        f"{worst * 1000:.0f} ms; RSS {rss_before:.0f} -> {rss_warm:.0f} (after {WARM}) -> "
        f"{rss_after:.0f} MiB; "
        f"cache {len(app.analyses.cache)}/{limit}"
    )
    assert worst < 10.0  # a sanity bound only: timing is not what this test checks
    # What is evicted is freed, and JAX's own caches are cleared every few
    # analyses (app/controllers/analyses.py): RSS ends within 10% of its level after WARM.
    assert rss_after <= 1.10 * rss_warm, (rss_warm, rss_after)
