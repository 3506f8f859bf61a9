"""Provides `Footer`: Textual's footer, rebuilt only when the keys it shows change.

Textual's Footer recomposes (removes and mounts a widget per key) whenever the
bindings may have changed: on every focus move and every screen opened or
closed, several times per change in this app, though the keys shown stay the
same. Each rebuild restyles every key and lays the screen out again, and each
new key binds its `compact` to the footer's with `data_bind`, whose watchers
Textual never drops (it prunes a watcher list only when the reactive changes,
and `compact` never does): the list grew by about twenty per change, every
bind scanned it, and each entry kept a removed key alive. Measured in the
1,000-change stress test, where the rebuilds were a large share of the time
between frames.
"""

from __future__ import annotations

from textual.widgets import Footer as TextualFooter


class Footer(TextualFooter):
    _shown: tuple | None = None  # the keys the current children show

    def _keys_shown(self) -> tuple:
        # What Footer.compose reads: each shown binding, enabled or not.
        return tuple(
            (binding.key, binding.description, binding.action, enabled, tooltip)
            for (_, binding, enabled, tooltip) in self.screen.active_bindings.values()
            if binding.show or binding.action == "command_palette"
        )

    async def recompose(self) -> None:
        if not self.is_attached or self.app.screen is not self.screen:
            # Under a dialog the footer is dimmed background: it is brought up to
            # date when its screen is on top again (that changes the bindings too).
            return
        shown = self._keys_shown() if self._bindings_ready else None
        if shown is not None and shown == self._shown and self.children:
            return
        # Textual stores watchers under this literal attribute name (reactive._watch).
        watchers = getattr(self, "__watchers", {}).get("compact")
        if watchers:
            watchers[:] = [(node, callback) for node, callback in watchers if node.is_attached]
        self._shown = shown
        await super().recompose()
