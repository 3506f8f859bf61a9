"""Provides MainScreen: the screen the app's panes live on.

Textual's Screen repaints itself whole whenever the focus moves (its `focused`
reactive repaints by default), though only the two widgets whose `:focus`
style changed need it, and they repaint themselves when their styles update.
At 160x45 that whole-screen render was most of what a focus key (`r`, `n`,
`s`, `tab`) cost the UI thread; the keys that move the focus are the ones
typed most.
"""

from __future__ import annotations

from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget


class MainScreen(Screen):
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)
