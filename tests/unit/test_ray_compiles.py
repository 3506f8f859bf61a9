"""Issue 31, item 4: a search's compiles as Ray tasks, on a local Ray of 2
CPUs started for this module: the same rows as compiling here, and a worker
killed mid-search costs nothing but its retry."""

import os
import textwrap

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed")

import remat_tui  # noqa: E402
from remat_tui.core.search.compare import compare  # noqa: E402
from remat_tui.core.xla.compile import costs as compiled  # noqa: E402
from remat_tui.core.xla.compile import service as compile_service  # noqa: E402
from remat_tui.core.xla.run import pool as compile_pool  # noqa: E402

# A scanned MLP whose args factory, in a Ray worker (not the test's own
# process), kills its process once when told to by a `.die` file beside it.
SOURCE = textwrap.dedent(
    """
    import os
    import jax, jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name
    import remat_tui

    DIE = os.path.splitext(__file__)[0] + ".die"


    def args():
        if os.getpid() != int(os.environ["REMAT_TEST_DRIVER_PID"]):
            try:
                os.remove(DIE)  # one worker claims it, once
            except FileNotFoundError:
                pass
            else:
                os._exit(1)
        return (jnp.ones((4, 32, 32)), jnp.ones((16, 32)))


    @remat_tui.target(args=args)
    def loss(ws, x):
        def block(x, w):
            h = checkpoint_name(jnp.tanh(x @ w), "h")
            return jnp.sin(h) @ w, None

        x, _ = jax.lax.scan(jax.checkpoint(block), x, ws)
        return jnp.sum(x**2)
    """
)
POLICIES = ["as_written", "nothing_saveable", "everything_saveable", "dots_saveable",
            "save_only_these_names('h')"]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _traced_here_first():
    """JAX keeps what it traced of its own jitted functions (jnp.matmul's),
    the user's line included, for the process: after another module traced
    the same operations at these shapes, this process's rows would name that
    file where the cluster's fresh workers name scanned.py. This module's
    traces start afresh, as in a process of their own (one pytest-xdist
    worker runs many files)."""
    import jax

    jax.clear_caches()


@pytest.fixture(scope="module")
def local_ray():
    os.environ["REMAT_TEST_DRIVER_PID"] = str(os.getpid())  # the workers inherit it
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    compile_pool.configure()
    compile_pool._executors.pop(("ray",), None)
    ray.shutdown()


@pytest.fixture(scope="module")
def target_file(tmp_path_factory):
    """One file for the module: the breakdown names it, and this process's
    traces of one code in two files may name the first file."""
    path = tmp_path_factory.mktemp("ray") / "scanned.py"
    path.write_text(SOURCE)
    return path


def rows(target, cluster=None) -> list[dict]:
    compiled.clear_cache()
    compile_service.clear_memo()
    compile_pool.configure(cluster=cluster)
    try:
        result = compare(target, policies=POLICIES, compiled=True)
    finally:
        compile_pool.configure()
    return [_without_timings(r.to_dict()) for r in result.rows]


def test_compare_on_ray_gives_the_rows_of_compiling_here(local_ray, target_file):
    target = remat_tui.load_targets(str(target_file))["loss"]
    here = rows(target)
    before = compile_service.counts.snapshot()
    there = rows(target, cluster="ray")
    after = compile_service.counts.snapshot()
    assert after["in_workers"] > before["in_workers"]  # compiled as Ray tasks
    assert after["compiled"] == before["compiled"]  # none of them here
    assert there == here


def test_a_worker_killed_mid_search_is_retried_and_nothing_is_lost(local_ray, target_file):
    target = remat_tui.load_targets(str(target_file))["loss"]
    here = rows(target)
    # The file is new to the cluster's workers, so each builds its arguments
    # again: a worker that compiled these programs in the test before answers
    # from its own cache (core/xla/compile/costs.py) and never reads the `.die`.
    stat = target_file.stat()
    os.utime(target_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    die = target_file.with_suffix(".die")
    die.write_text("")
    before = compile_service.counts.snapshot()
    there = rows(target, cluster="ray")
    assert not die.exists()  # a worker claimed it, and died
    assert compile_service.counts.snapshot()["compiled"] == before["compiled"]  # none here
    assert there == here
    assert not compile_pool.notices  # retried on the cluster, not made here


def _without_timings(row: dict) -> dict:
    compiled_row = {k: v for k, v in (row["compiled"] or {}).items() if k != "seconds"}
    return {**row, "compiled": compiled_row, "time": None}
