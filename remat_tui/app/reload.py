"""Provides hot reload: the target file and the local modules it imports are
watched (watchfiles, in a thread of its own); on save they are imported again
in a thread worker and the current request (policy, names, site overrides,
device) is analysed again through the app's normal path.

The watcher is a plain daemon thread, not a Textual worker: a worker that never
finishes would keep `app.workers.wait_for_complete()`, which tests and benches
use to know the app is idle, from ever returning.

A save that breaks the file shows the error in place and keeps the last good
analysis; a reload that a newer save supersedes is dropped (each save is a new
`generation`). After a reload the panes keep their scroll positions and the
residual table its selection where they still exist.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from functools import partial

from remat_tui.app.messages import FilesChanged, Progress, Reloaded, ReloadFailed
from remat_tui.core.setup.loading import import_targets


def watch(app, files: frozenset[str], stop: threading.Event) -> None:
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


@dataclass
class View:
    """Where the user was, to come back to after a reload."""

    offsets: dict[str, tuple[int, int]]  # pane id -> scroll offset
    cursor: int
    residual: tuple | None  # what the selected residual was (see `_identity`)


def _identity(r) -> tuple:
    return (r.aval, r.kind, r.primitive, r.name, r.argument)


class Reloader:
    """The app's hot reload: which files are watched, and each save's generation."""

    PANES = ("#forward", "#backward", "#residuals", "#source")

    def __init__(self, app):
        self.app = app
        self.generation = 0
        self.watched: frozenset[str] = frozenset()
        self.view: View | None = None  # restored when the reloaded analysis is shown
        self._lock = threading.Lock()  # one import at a time: they share sys.modules
        self._stop = threading.Event()

    def watch(self, files) -> None:
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

    def saved(self, paths) -> None:
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
                targets, error, watched = import_targets(self.app.path)
            except Exception as exc:  # our bug: say so, keep the app alive
                targets, error, watched = None, f"internal error while reloading: {exc!r}", ()
        if error is not None:
            self.app.post_message(ReloadFailed(generation, error, watched))
        else:
            self.app.post_message(Reloaded(generation, targets, watched))

    # ---- on the UI thread ------------------------------------------------------------

    def reloaded(self, message: Reloaded) -> bool:
        """Take in a reload's targets; False when a newer save superseded it or the
        app has no target yet (the caller then loads as at start)."""
        self.watch(message.watched)
        app = self.app
        if message.generation != self.generation:
            return True
        if app.target is None:
            return False
        target = message.targets.get(app.target.name)
        if target is None:
            app.activity.end()
            app.view.show_error(
                f"{app.path} no longer defines a target named {app.target.name!r} "
                f"(it defines {', '.join(message.targets)}); press t to pick one."
            )
            app.targets = message.targets
            return True
        app.targets = message.targets
        if len(app.screen_stack) > 1:  # compare, suggest or diff: made from the code before
            app.notify(
                "The file was saved: the screen open shows the code before the save; "
                "close it and open it again for the new code.",
                severity="warning",
            )
        app.view.forget_sources(message.watched)  # the source pane reads saved files again
        # Analyses of the old code are dropped (the shown one stays until the new
        # one arrives); `reloads` is part of the cache key, so a trace of the old
        # code that finishes late is never taken for the new one.
        app.reloads += 1
        app.analyses.forget_all_but(app.shown)
        self.remember_view()
        from remat_tui.app.commands import keep_typed

        before = list(app.policy_specs)
        app.start(target, keep_policy=True)
        keep_typed(app, before)  # specs typed in the palette stay listed
        return True

    def failed(self, message: ReloadFailed) -> None:
        self.watch(message.watched)
        if message.generation == self.generation:
            self.app.activity.end()
            self.app.view.show_error(message.message)
            if self.app.shown is not None:
                self.app.view.update_status(self.app.shown)

    def remember_view(self) -> None:
        app = self.app
        from remat_tui.app.residual_table import ResidualTable

        table = app.query_one(ResidualTable)
        shown = app.shown
        residual = None
        if shown is not None and table.selected is not None:
            residual = _identity(shown.residuals[table.selected])
        offsets = {pane: tuple(app.query_one(pane).scroll_offset) for pane in self.PANES}
        self.view = View(offsets, table.selected or 0, residual)

    def restore_view(self, a) -> None:
        """After the reloaded analysis is drawn: the same residual selected (the
        nearest of the same kind, else the same row) and every pane scrolled back."""
        view, self.view = self.view, None
        if view is None:
            return
        app = self.app
        from remat_tui.app.residual_table import ResidualTable

        table = app.query_one(ResidualTable)
        if a.residuals:
            same = [i for i, r in enumerate(a.residuals) if _identity(r) == view.residual]
            index = min(same, key=lambda i: abs(i - view.cursor)) if same else view.cursor
            index = min(index, len(a.residuals) - 1)
            if index != table.selected:
                # The residual's row on screen: the table may be sorted by bytes.
                table.set_reactive(ResidualTable.cursor, table.order.index(index))
                table.refresh()
                app.view.select_residual(index)
        for pane, (x, y) in view.offsets.items():
            app.query_one(pane).scroll_to(x=x, y=y, animate=False, immediate=True)
