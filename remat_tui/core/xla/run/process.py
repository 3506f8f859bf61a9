"""Provides CompileProcess: steps compiled (and, on request, run and timed) in
a child process of their own, for the app.

Why not a thread: lowering a large gradient is a second or more of Python. In
a thread it shares the app's GIL and garbage collector, so keys pressed
meanwhile wait (a full collection stops every thread). A child process
shares neither, and cancelling it is real: it is killed, and a fresh one is
started at once (its JAX import overlaps whatever the app does next).

The child imports the target file and its local modules afresh, as the app's
hot reload does (core/loading.import_targets), whenever the parent's reload
token changes; builds the arguments for the device; and calls
core/compiled.compile_answer, so the numbers are the ones the CLI and the API
give. It compiles the file as it is on disk: a save the app has not reloaded
yet, or failed to reload, is compiled as saved. Anything the child prints
goes nowhere: the app owns the terminal.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import IO, TYPE_CHECKING, Any

from remat_tui.errors import RematError

if TYPE_CHECKING:  # the app imports this module before JAX is imported
    from remat_tui.core.setup.config import Config
    from remat_tui.core.xla.compile.compiled import Compiled
    from remat_tui.core.xla.run.measure import Measured

POLL_SECONDS = 0.05  # how often a waiting compile looks at `cancelled`
_LENGTH = struct.Struct("<Q")  # each message: its length, then its pickle


class WorkerLost(RematError):
    """The child died before it answered (killed, or out of memory)."""


@dataclass(frozen=True)
class CompileRequest:
    """One compile of a parallel search (`xla.run.pool`), as a worker
    (this module's child, or a Ray task) rebuilds it: the target's file and
    name and the batch it was built at (None: the example's), the
    configuration, the device's label, whether XLA's breakdown is read, the
    program's key as the asking process lowered it (a worker that lowers
    another program, the file having changed, says so instead of compiling),
    whether the store on disk is used, and the mesh the target asks for
    (`Target.mesh`, built over the worker's devices as over the asker's)."""

    file: str
    name: str
    batch: int | None
    config: Config
    device: str
    memory: bool
    key: str
    store: bool
    mesh: tuple[tuple[str, int], ...] | None = None


class CompileProcess:
    """One child process, compiling one request at a time. (A plain
    subprocess, not multiprocessing: that needs the parent's stderr file
    descriptor, which Textual replaces.)"""

    def __init__(self) -> None:
        self._request = threading.Lock()  # one request at a time
        self._state = threading.Lock()  # guards _process and _closed
        self._process: subprocess.Popen | None = None
        self._closed = False

    def start(self) -> None:
        """Start the child now (it imports JAX meanwhile), if it is not running."""
        with self._state:
            self._start_locked()

    def compile(
        self,
        file: str,
        name: str,
        config: Config,
        token: object,
        cancelled: Callable[[], bool],
        runs: int | None = None,
        mesh: tuple[tuple[str, int], ...] | None = None,
    ) -> tuple[Compiled, Measured | None]:
        """Compile target `name` of `file` under `config` (its device included)
        and, with `runs`, run it that many times there (`xla.run.measure`);
        `mesh`: the mesh the target asks for (`Target.mesh`, the app's --mesh).
        `token` changes when the file is reloaded. Raises RematError with the
        child's message, or Cancelled (the child killed) once `cancelled()`."""
        return self.ask((file, name, config, token, runs, mesh), cancelled)

    def ask(self, message: object, cancelled: Callable[[], bool]) -> Any:
        """Send `message` (the app's request tuple, or a CompileRequest of a
        parallel search) and return the child's answer; raises as `compile`."""
        from remat_tui.core.trace.configured import Cancelled

        with self._request:
            if cancelled():
                raise Cancelled()
            with self._state:
                process = self._start_locked()
            if process is None:  # closed: the app is exiting
                raise Cancelled()
            try:
                assert process.stdin is not None and process.stdout is not None  # pipes
                _write(process.stdin, message)
                while not select.select([process.stdout], [], [], POLL_SECONDS)[0]:
                    if cancelled():
                        self._replace(process)
                        raise Cancelled()
                kind, payload = _read(process.stdout)
            except Cancelled:
                raise
            except Exception:  # a closed pipe, a truncated or unreadable reply
                code = _exit_code(process)
                self._replace(process)
                if self._closed:
                    raise Cancelled() from None
                raise WorkerLost(
                    f"the compile process ended unexpectedly (exit code {code}); "
                    "press p twice to compile again"
                ) from None
        if kind == "error":
            raise RematError(payload)
        if kind == "internal":
            raise WorkerLost(payload)
        return payload

    def close(self) -> None:
        """Kill the child for good (the app is exiting); a compile waiting on it
        raises Cancelled."""
        with self._state:
            self._closed = True
            process, self._process = self._process, None
        _end(process)

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    def _start_locked(self) -> subprocess.Popen | None:
        if self._closed:
            return None
        if self._process is not None and self._process.poll() is None:
            return self._process
        _end(self._process)  # died while idle: its pipes are closed too
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "remat_tui.core.xla.run.process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        return self._process

    def _replace(self, process: subprocess.Popen) -> None:
        """Kill `process` and start the next child at once (unless closed), so
        JAX is importing there while the app goes on."""
        with self._state:
            if self._process is process:
                self._process = None
            _end(process)
            self._start_locked()


def _end(process: subprocess.Popen | None) -> None:
    if process is None:
        return
    process.kill()
    process.wait(timeout=5)
    for stream in (process.stdin, process.stdout):
        if stream is not None:  # both are pipes: never None
            stream.close()


def _exit_code(process: subprocess.Popen) -> int | None:
    try:
        return process.wait(timeout=1)
    except subprocess.TimeoutExpired:
        return None


def _write(stream: IO[bytes], message: object) -> None:
    data = pickle.dumps(message)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def _read(stream: IO[bytes]) -> Any:
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError("the other side closed the pipe")
    (length,) = _LENGTH.unpack(head)
    data = stream.read(length)
    if len(data) < length:
        raise EOFError("the other side closed the pipe")
    return pickle.loads(data)


def serve() -> None:
    """The child: answer compile requests until the parent goes away. Its
    output (the user's prints, libtpu's warnings) goes to /dev/null at the
    file descriptors, as C libraries write there too; replies go to a copy
    of the original stdout."""
    replies = os.fdopen(os.dup(1), "wb")
    requests = sys.stdin.buffer
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    from remat_tui.core.setup.loading import import_targets
    from remat_tui.core.xla.compile.costs import compile_answer
    from remat_tui.core.xla.run import (
        process as compile_process,  # not __main__'s copy: what the parent pickles
    )
    from remat_tui.core.xla.run.measure import measure

    loaded: tuple[tuple, dict] | None = None
    while True:
        try:
            request = _read(requests)
        except EOFError:
            return
        try:
            if isinstance(request, compile_process.CompileRequest):
                try:
                    _write(replies, ("ok", compile_process.answer(request)))
                except RematError:
                    raise
                except Exception as exc:  # our bug: the parent compiles it itself
                    _write(replies, ("internal", f"internal error while compiling: {exc!r}"))
                continue
            file, name, config, token, runs, mesh = request
            if loaded is None or loaded[0] != (file, token):
                loaded = None
                targets, error, _ = import_targets(file)
                if error is not None:
                    raise RematError(error)
                assert targets is not None  # import_targets gives targets or an error
                loaded = ((file, token), targets)
            targets = loaded[1]
            if name not in targets:
                raise RematError(f"{file}: no target named '{name}' any more")
            target = targets[name] if mesh is None else replace(targets[name], mesh=mesh)
            reply: tuple
            if runs is None:
                reply = (compile_answer(target, config, memory=True).result, None)
            else:
                reply = measure(target, config, runs)
            _write(replies, ("ok", reply))
        except RematError as exc:
            _write(replies, ("error", exc.message))
        except Exception as exc:  # our bug: the parent shows it in place
            _write(replies, ("error", f"internal error while compiling: {exc!r}"))


_imported: dict[str, tuple[float, dict]] = {}  # a worker's target files: path -> (mtime, targets)


def answer(request: CompileRequest) -> tuple[str, object]:
    """A worker's answer to `request` (here, or in a Ray task): ("ok", the
    Compiled's dict) or ("stale", what the worker's program is made of) when
    it lowered another program than the asking process did."""
    from remat_tui.core.setup.devices import device_set, resolve_device
    from remat_tui.core.setup.loading import import_targets, takes_devices
    from remat_tui.core.setup.scaling import at_batch
    from remat_tui.core.xla.compile import service as compile_service
    from remat_tui.core.xla.compile.costs import compile_answer

    path = request.file if os.path.isfile(request.file) else os.path.abspath(request.file)
    mtime = os.path.getmtime(path)
    if _imported.get(path, (None,))[0] != mtime:
        targets, error, _ = import_targets(path)
        if error is not None:
            raise RematError(error)
        assert targets is not None  # import_targets gives targets or an error
        _imported[path] = (mtime, targets)
    targets = _imported[path][1]
    if request.name not in targets:
        raise RematError(f"{request.file}: no target named '{request.name}'")
    target = targets[request.name]
    if request.mesh is not None:
        target = replace(target, mesh=request.mesh)
    dev = resolve_device(request.device)
    if request.batch is not None:
        devices = device_set(dev) if takes_devices(target) else None
        target = at_batch(target, request.batch, devices)
    compile_service.use_store(request.store)
    try:
        with compile_service.expecting(request.key):
            result = compile_answer(
                target, request.config, device=dev, memory=request.memory
            ).result
    except compile_service.OtherProgram as other:
        return ("stale", other.parts)
    return ("ok", result.stored())


if __name__ == "__main__":
    serve()
