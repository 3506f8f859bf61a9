"""Provides `run_all`: a search's independent pieces of work (a row's compile,
a configuration's batch search) run side by side, their compiles in worker
processes on this machine or as Ray tasks on a cluster (Contract 13), and
`configure`, which says where.

Where the compiles run:

- `--jobs 1`: here, one after another.
- `--jobs N`: in N worker processes (`xla.run.process`'s child, as
  the app's), started once and kept for the process's life.
- neither: REMAT_TUI_JOBS where set, else as many workers as the machine
  has cores and memory for (one per MEMORY_PER_JOB of available memory, at
  most one per CORES_PER_JOB cores: XLA spreads one compile over more than
  one core, bench/bench_compiles.py), once a compile here took WORKER_WORTH_SECONDS: a
  worker costs a JAX import and the target's, a second or more, which a
  small compile does not repay.
- `--cluster ray`, or RAY_ADDRESS set: as Ray tasks (`ray.init()`: the
  cluster RAY_ADDRESS names, else a local Ray), as many at once as the
  cluster has CPUs; a task whose worker dies is run again (MAX_RETRIES), and
  a compile that could not be had there is made here: nothing is lost.

What goes to a worker is the compile alone. The asking thread lowers the
program here (its key, `xla.compile.service`: a known program is
answered without any worker); the worker imports the target's file, lowers
it again and compiles only if it gets the same key, else says so and the
compile is made here (the file changed meanwhile, or the worker's JAX,
flags or, for a CPU compile, host differ: a CPU compile is the host's own).
So a result is the same wherever it was compiled, but for its compile time.
A target made in code (no file to import) compiles here, in the threads.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from remat_tui.core.runtime.machine import available_ram
from remat_tui.core.xla.compile import service as compile_service
from remat_tui.core.xla.compile.service import Program
from remat_tui.core.xla.run.process import CompileProcess, CompileRequest, WorkerLost
from remat_tui.errors import RematError

if TYPE_CHECKING:
    from remat_tui.core.xla.compile.costs import Source

MEMORY_PER_JOB = 3 * 2**30  # available memory a default worker wants (a large compile's)
CORES_PER_JOB = 2  # a default worker per two cores: one compile already uses more than one
WORKER_WORTH_SECONDS = 3.0  # a compile this long repays starting workers
MAX_RETRIES = 3  # a Ray task whose worker died runs again this many times
POLL_SECONDS = 0.1  # how often a wait on Ray looks at `cancelled`
RAY_EXTRA = "pip install 'remat-tui[ray]'"
JOBS_ENV = "REMAT_TUI_JOBS"  # the default for --jobs
CLUSTERS = ("ray",)

_settings: dict = {"jobs": None, "cluster": None}
_executors: dict[
    tuple, Executor
] = {}  # ("local", jobs) or ("ray",) -> its executor, kept for the process
_lock = threading.Lock()
notices: set[str] = set()  # what a user should know about where compiles ran


def configure(jobs: int | None = None, cluster: str | None = None) -> None:
    """Where a search's compiles run (the module doc): `jobs` worker processes
    (None: from the machine), or on a `cluster` ("ray"; None: Ray where
    RAY_ADDRESS is set)."""
    if jobs is not None and (not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1):
        raise RematError(f"jobs {jobs!r}: give a whole number of worker processes, 1 or more.")
    if cluster is not None and cluster not in CLUSTERS:
        raise RematError(f"cluster {cluster!r}: the one cluster remat-tui runs on is 'ray'.")
    _settings.update(jobs=jobs, cluster=cluster)


def cluster() -> str | None:
    return _settings["cluster"] or ("ray" if os.environ.get("RAY_ADDRESS") else None)


def default_jobs() -> int:
    """Workers the machine has room for: one per CORES_PER_JOB cores, and one
    per MEMORY_PER_JOB of available memory, whichever is fewer."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    available = available_ram()
    by_memory = available // MEMORY_PER_JOB if available else (cores or 1)
    return max(1, min((cores or 1) // CORES_PER_JOB, by_memory))


def run_all(items: Iterable, work: Callable) -> Iterator:
    """`work(item)` for every item, results in the items' order, side by side
    where compiles can run elsewhere (the module doc); `work`'s compiles go
    there. An exception from `work` (Cancelled: `work` checks) stops the rest."""
    items = list(items)
    executor = _chosen()
    if executor is None and _adaptive() and items:
        if not _slow():
            yield work(items[0])  # its compile says whether workers would repay their start
            items = items[1:]
        if _slow():
            executor = _local(default_jobs())
    if executor is None or executor.width < 2 or len(items) < 2:
        with _dispatching(executor):
            for item in items:
                yield work(item)
        return

    def run(item: Any) -> Any:
        with _dispatching(executor):
            return work(item)

    threads = ThreadPoolExecutor(executor.width, thread_name_prefix="remat-tui-compile")
    futures = [threads.submit(run, item) for item in items]
    try:
        for future in futures:
            yield future.result()
    finally:
        for future in futures:
            future.cancel()
        threads.shutdown(wait=True)


def width() -> int:
    """How many compiles can run at once now (1 where they run here)."""
    executor = _chosen()
    if executor is None and _adaptive() and _slow():
        return default_jobs()
    return executor.width if executor is not None else 1


def _slow() -> bool:
    """Whether a compile here took long enough for workers to repay their start."""
    return compile_service.counts.slowest >= WORKER_WORTH_SECONDS


class _dispatching:
    """Within it, this thread's compiles go to `executor` (None: here)."""

    def __init__(self, executor: Executor | None) -> None:
        self.executor = executor

    def __enter__(self) -> None:
        send = self.executor.compile if self.executor is not None else None
        self.token = compile_service.dispatch.set(send)

    def __exit__(self, *exc: object) -> None:
        compile_service.dispatch.reset(self.token)


def _chosen() -> Executor | None:
    if cluster() == "ray":
        return _executor(("ray",), _Ray)
    jobs = _jobs()
    return _local(jobs) if jobs is not None and jobs > 1 else None


def _jobs() -> int | None:
    """The jobs asked for: --jobs, else REMAT_TUI_JOBS, else None (the machine's)."""
    if _settings["jobs"] is not None:
        return _settings["jobs"]
    text = os.environ.get(JOBS_ENV, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise RematError(f"{JOBS_ENV}={text!r}: give a whole number of workers, 1 or more.")
    return int(text)


def _adaptive() -> bool:
    return cluster() is None and _jobs() is None and default_jobs() > 1


def _local(jobs: int) -> Executor:
    return _executor(("local", jobs), lambda: _Local(jobs))


def _executor(key: tuple, make: Callable[[], Executor]) -> Executor:
    with _lock:
        if key not in _executors:
            _executors[key] = make()
        return _executors[key]


def _request(program: Program, memory: bool, source: Source) -> CompileRequest:
    assert source.config is not None  # the compile sets it before asking a worker
    file = source.file
    relative = os.path.relpath(file)
    if not relative.startswith(os.pardir):  # under the current folder: a cluster's working dir
        file = relative
    return CompileRequest(
        file, source.name, source.batch, source.config, program.parts["device"], memory,
        program.key,
        compile_service.store_enabled(),
        source.mesh,
    )  # fmt: skip


def _answered(reply: tuple[str, Any], program: Program) -> dict | None:
    """A worker's reply: the Compiled's dict, or None where it lowered another
    program (noted, and compiled here)."""
    kind, payload = reply
    if kind == "ok":
        return payload
    differ = sorted(k for k in program.parts if payload.get(k) != program.parts[k])
    notices.add(
        "a worker lowered another program than this process ("
        + ", ".join(differ)
        + " differ): those compiles were made here"
    )
    return None


class _Local:
    """Worker processes on this machine, started as they are first needed."""

    def __init__(self, jobs: int):
        self.width = jobs
        self._idle: queue.Queue = queue.Queue()
        self._started: list[CompileProcess] = []
        self._lock = threading.Lock()
        atexit.register(self.close)

    def compile(
        self, program: Program, memory: bool, source: Source, cancelled: Callable[[], bool] | None
    ) -> dict | None:
        request = _request(program, memory, source)
        for attempt in range(2):  # a worker lost is replaced, and asked once more
            process = self._take()
            try:
                reply = process.ask(request, cancelled or (lambda: False))
            except WorkerLost:
                if attempt:
                    notices.add("a worker process died twice on one compile: it was made here")
                    return None
                continue
            finally:
                self._idle.put(process)
            return _answered(reply, program)
        return None

    def _take(self) -> CompileProcess:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if len(self._started) < self.width:
                process = CompileProcess()
                process.start()
                self._started.append(process)
                return process
        return self._idle.get()

    def close(self) -> None:
        for process in self._started:
            process.close()


class _Ray:
    """Ray tasks, on the cluster RAY_ADDRESS names or a local Ray."""

    def __init__(self) -> None:
        try:
            import ray
        except ImportError:
            raise RematError(
                f"--cluster ray (or RAY_ADDRESS) needs Ray: {RAY_EXTRA}, on this machine and "
                "on the cluster's."
            ) from None
        self.ray = ray
        if not ray.is_initialized():
            ray.init(log_to_driver=False)
        self.task = ray.remote(max_retries=MAX_RETRIES, num_cpus=1)(_ray_compile)
        self.width = max(1, int(ray.cluster_resources().get("CPU", 1)))

    def compile(
        self, program: Program, memory: bool, source: Source, cancelled: Callable[[], bool] | None
    ) -> dict | None:
        from remat_tui.core.trace.configured import Cancelled

        ray = self.ray
        ref = self.task.remote(_request(program, memory, source))
        while not ray.wait([ref], timeout=POLL_SECONDS)[0]:
            if cancelled is not None and cancelled():
                ray.cancel(ref, force=True)
                raise Cancelled()
        try:
            return _answered(ray.get(ref), program)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, RematError):
                raise RematError(cause.message) from None
            notices.add(f"a Ray task failed ({type(cause or exc).__name__}): compiled here")
        except ray.exceptions.RayError as exc:  # the worker lost after every retry
            notices.add(f"a Ray task was lost ({type(exc).__name__}): compiled here")
        return None


Executor = _Local | _Ray  # where a search's compiles run, when not here


def _ray_compile(request: CompileRequest) -> tuple[str, object]:
    """The Ray task: compile_process's answer, in a worker of the cluster."""
    from remat_tui.core.xla.run.process import answer

    return answer(request)
