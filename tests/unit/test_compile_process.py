"""The app's compiles in a child process (core/xla/run/process.py): the same
numbers as compiling in this process, one child reused across requests, a
cancel that kills it, the reload token, and errors coming back as messages."""

import itertools
import os
import textwrap
import time

import pytest
from conftest import example

from remat_tui.core.setup.config import Config
from remat_tui.core.setup.loading import load_targets
from remat_tui.core.trace.configured import Cancelled
from remat_tui.core.xla.compile.costs import compile_answer
from remat_tui.core.xla.run.process import CompileProcess
from remat_tui.errors import RematError


@pytest.fixture
def child():
    process = CompileProcess()
    yield process
    process.close()


def never() -> bool:
    return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable"])
def test_the_child_gives_the_numbers_compiling_here_gives(child, policy):
    path = example("mlp.py")
    config = Config.make(policy)
    there, measured = child.compile(path, "loss", config, 0, never)
    here = compile_answer(load_targets(path)["loss"], config).result
    assert measured is None  # not asked to run it
    assert there.peak_bytes == here.peak_bytes and there.temp_bytes == here.temp_bytes
    assert there.device == here.device == "cpu:0"


def test_one_child_answers_request_after_request(child):
    path = example("mlp.py")
    first, _ = child.compile(path, "loss", Config.make("nothing_saveable"), 0, never)
    pid = child.pid
    second, _ = child.compile(path, "loss", Config.make("everything_saveable"), 0, never)
    assert child.pid == pid
    assert first.temp_bytes != second.temp_bytes  # each its own configuration


def once_sent():
    """A `cancelled` that says yes from its second call on: compile asks once
    before sending the request, then while the child works on it."""
    calls = itertools.count()
    return lambda: next(calls) >= 1


def test_a_cancel_kills_the_child_and_starts_another(child):
    path = example("transformer.py")  # its unrolled gradient takes seconds to compile
    child.start()
    doomed = child.pid
    asked = time.monotonic()
    with pytest.raises(Cancelled):
        # Cancelled as soon as the request is with the child (the first poll
        # after sending it), however fast the machine compiles.
        child.compile(path, "unrolled", Config(), 0, once_sent())
    assert time.monotonic() - asked < 5  # not the compile's whole length
    for _ in range(100):
        if not alive(doomed):
            break
        time.sleep(0.05)
    assert not alive(doomed)
    assert child.pid != doomed and alive(child.pid)  # ready for the next request


def test_a_new_token_loads_the_file_again(child, tmp_path):
    path = tmp_path / "grows.py"

    def write(width: int) -> None:
        path.write_text(
            textwrap.dedent(f"""
                import jax, jax.numpy as jnp
                import remat_tui

                @remat_tui.target(args=lambda: (jnp.ones(({width}, {width})),))
                def loss(w):
                    return jnp.sum(jnp.sin(w @ w))
            """)
        )

    write(8)
    small, _ = child.compile(str(path), "loss", Config(), 0, never)
    write(64)
    assert child.compile(str(path), "loss", Config(), 0, never)[0] == small  # same token
    bigger, _ = child.compile(str(path), "loss", Config(), 1, never)
    assert bigger.argument_bytes == 64 * 64 * 4 and small.argument_bytes == 8 * 8 * 4


def test_errors_come_back_as_messages(child):
    path = example("mlp.py")
    with pytest.raises(RematError, match="no target named 'nope'"):
        child.compile(path, "nope", Config(), 0, never)
    with pytest.raises(RematError, match="unknown TPU topology|libtpu"):
        child.compile(path, "loss", Config(device="tpu:v9:1x1"), 0, never)
    assert child.compile(path, "loss", Config(), 0, never)[0].peak_bytes > 0  # still serving


def test_the_child_runs_a_step_when_asked(child):
    compiled, measured = child.compile(example("mlp.py"), "loss", Config(), 0, never, runs=2)
    assert compiled.fits and measured.runs == 2 and 0 < measured.min_seconds


def test_a_child_that_dies_is_reported_and_replaced(child):
    path = example("transformer.py")
    child.start()
    victim = child.pid
    asked = time.monotonic()

    def kill_it() -> bool:
        if time.monotonic() - asked > 0.5 and alive(victim):
            os.kill(victim, 9)
        return False

    with pytest.raises(RematError, match="ended unexpectedly"):
        child.compile(path, "unrolled", Config(), 0, kill_it)
    assert child.compile(example("mlp.py"), "loss", Config(), 0, never)[0].peak_bytes > 0


def test_a_new_token_imports_the_files_local_modules_afresh(child, tmp_path):
    # As the app's hot reload does: a saved helper module is compiled as saved.
    (tmp_path / "sizes.py").write_text("WIDTH = 8\n")
    path = tmp_path / "uses_sizes.py"
    path.write_text(
        textwrap.dedent("""
            import jax.numpy as jnp
            import remat_tui
            from sizes import WIDTH

            @remat_tui.target(args=lambda: (jnp.ones((WIDTH, WIDTH)),))
            def loss(w):
                return jnp.sum(jnp.sin(w @ w))
        """)
    )
    small, _ = child.compile(str(path), "loss", Config(), 0, never)
    (tmp_path / "sizes.py").write_text("WIDTH = 64\n")
    bigger, _ = child.compile(str(path), "loss", Config(), 1, never)
    assert (small.argument_bytes, bigger.argument_bytes) == (8 * 8 * 4, 64 * 64 * 4)


def test_closing_during_a_compile_ends_it_and_starts_no_other(child):
    import threading

    path = example("transformer.py")
    outcome = []
    sent = threading.Event()
    calls = itertools.count()

    def polled() -> bool:  # never cancels; says when the request has been sent
        if next(calls) >= 1:
            sent.set()
        return False

    def compile_in_a_worker():
        try:
            child.compile(path, "unrolled", Config(), 0, polled)
            outcome.append("finished")
        except Cancelled:
            outcome.append("cancelled")
        except Exception as exc:  # anything else is a bug
            outcome.append(repr(exc))

    worker = threading.Thread(target=compile_in_a_worker)
    worker.start()
    assert sent.wait(timeout=120)  # the child has the request: it is compiling
    running = child.pid
    child.close()
    worker.join(timeout=10)
    assert outcome == ["cancelled"]
    assert child.pid is None and not alive(running)
    with pytest.raises(Cancelled):  # closed for good: no new child
        child.compile(example("mlp.py"), "loss", Config(), 0, never)
    assert child.pid is None
