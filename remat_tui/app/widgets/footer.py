"""Provides `Footer`: Textual's footer, rebuilt only when the keys it shows
change, and showing only the keys that fit whole.

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

Textual's Footer also lays every key out on one line however narrow the
screen, and the keys past its width run on under the palette key docked at the
right: the screen showed a key cut to its letter or a word cut short (`v` at
120 columns, `? he` at 80) and a stray letter beside the palette key. Here the
keys that do not fit whole are hidden: the last ones first (KEYS orders them
so), `?` and `q` last of all, as the help lists every key.
"""

from __future__ import annotations

from textual.widgets import Footer as TextualFooter
from textual.widgets._footer import FooterKey  # not exported by textual.widgets

KEPT_FIRST = ("help", "quit")  # the App's actions whose keys are hidden last
COMPACT_BELOW = 120  # columns: narrower, the keys lose their padding, so that more fit


def key_width(key: FooterKey) -> int:
    """The columns `key` takes in the footer's row, margin included, whether
    it is shown or not (a hidden key has no region to read it from)."""
    content = key.get_content_width(key.size, key.app.size)  # its rendered text
    return content + key.styles.gutter.width + key.styles.margin.width


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
        self.call_after_refresh(self.fit_keys)

    def on_resize(self) -> None:
        # Each screen's footer on its own: one opened after the terminal last
        # changed width is as compact as the one beneath it.
        self.compact = self.size.width < COMPACT_BELOW
        self.call_after_refresh(self.fit_keys)

    def watch_compact(self) -> None:  # the keys' padding and margins change
        self.call_after_refresh(self.fit_keys)

    def fit_keys(self) -> None:
        """Show the keys that fit whole beside the palette key, hide the rest."""
        keys, docked = [], 0
        for key in self.query_children(FooterKey):
            if key.has_class("-command-palette"):  # docked at the right, always shown
                docked += key_width(key)
            else:
                keys.append(key)
        room = self.size.width - docked
        kept_first = [key for key in keys if key.action.removeprefix("app.") in KEPT_FIRST]
        for key in kept_first:  # hidden only where they alone do not fit
            room -= key_width(key)
        shown = {key for key in kept_first if room >= 0}
        for key in keys:
            if key in kept_first:
                continue
            if key_width(key) > room:
                break  # the keys after it are hidden too: the footer keeps KEYS' order
            room -= key_width(key)
            shown.add(key)
        for key in keys:
            key.display = key in shown
