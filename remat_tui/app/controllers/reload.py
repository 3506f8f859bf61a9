"""Provides hot reload: the target file and the local modules it imports are
watched (watchfiles, in a thread of its own); on save they are imported again
in a thread worker, and the App analyses the current request (policy, names,
site overrides, device) again through its normal path (app/controllers/loading.py
`reloaded`).

The watcher is a plain daemon thread, not a Textual worker: a worker that never
finishes would keep `app.workers.wait_for_complete()`, which tests and benches
use to know the app is idle, from ever returning.

A save that breaks the file shows the error in place and keeps the last good
analysis; a reload that a newer save supersedes is dropped (each save is a new
`generation`). After a reload the panes keep their scroll positions and the
residual table its selection where they still exist (app/widgets/shown_view.py).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable
from functools import partial

from textual.app import App

from remat_tui.app.messages import FilesChanged, Progress, Reloaded, ReloadFailed
from remat_tui.app.screens.failure import failure_words
from remat_tui.core.setup.loading import import_targets


def watch(app: App, files: frozenset[str], stop: threading.Event) -> None:
    """Post FilesChanged whenever one of `files` is saved, until `stop` is set. The
    folders are watched, not the files: editors often save by writing a new file
    and renaming it over the old one."""
    from watchfiles import Change
    from watchfiles import watch as watch_files

    folders = sorted({os.path.dirname(f) for f in files})
    try:
        for changes in watch_files(
            *folders,
            watch_filter=lambda _, path: path in files,
            recursive=False,
            step=20,  # the quiet time that ends a burst of writes (one editor save)
            stop_event=stop,
            rust_timeout=500,
            raise_interrupt=False,
        ):
            saved = tuple(sorted({p for change, p in changes if change != Change.deleted}))
            if saved and not stop.is_set():
                app.post_message(FilesChanged(saved))
    except Exception as exc:  # a folder vanished, too many watches: reload is off
        with contextlib.suppress(Exception):  # the app may be closing
            app.call_from_thread(app.notify, f"hot reload is off: {exc}", severity="warning")


class Reloader:
    """The app's hot reload: which files are watched, and each save's generation."""

    def __init__(self, app: App, path: str):
        self.app = app  # Textual's: run_worker, post_message, call_from_thread, notify
        self.path = path
        self.generation = 0
        self.watched: frozenset[str] = frozenset()
        self._lock = threading.Lock()  # one import at a time: they share sys.modules
        self._stop = threading.Event()

    def watch(self, files: Iterable[str]) -> None:
        """Watch `files` (the watcher restarts only when the set changes)."""
        files = frozenset(os.path.realpath(f) for f in files)
        if files and files != self.watched:
            self.watched = files
            self._stop.set()
            self._stop = threading.Event()
            threading.Thread(
                target=watch, args=(self.app, files, self._stop), name="watch", daemon=True
            ).start()

    def stop(self) -> None:
        """Stop watching (the app is closing)."""
        self._stop.set()

    def saved(self, paths: Iterable[str]) -> None:
        """A watched file was saved: import again, in a thread."""
        self.generation += 1
        self.app.run_worker(
            partial(self._reimport, self.generation, tuple(paths)),
            thread=True,
            group="reload",
            exit_on_error=False,
        )

    def _reimport(self, generation: int, paths: tuple[str, ...]) -> None:
        with self._lock:
            if generation != self.generation:
                return  # a newer save is already waiting: import once, for that one
            names = ", ".join(os.path.basename(p) for p in paths)
            self.app.post_message(Progress(f"saved {names}: importing it again"))
            try:
                targets, error, watched = import_targets(self.path)
            except Exception as exc:  # our bug: say so, keep the app alive
                targets, error, watched = None, f"while reloading: {failure_words(exc)}", ()
        if error is not None:
            self.app.post_message(ReloadFailed(generation, error, watched))
        else:
            assert targets is not None  # import_targets gives targets or an error
            self.app.post_message(Reloaded(generation, targets, watched))

    def answers(self, message: Reloaded | ReloadFailed) -> bool:
        """Take in the files a reload imported (watched from now on); whether it
        answers the latest save (a newer save supersedes it)."""
        self.watch(message.watched)
        return message.generation == self.generation
