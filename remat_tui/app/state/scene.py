"""Provides Scene: the App's state as one value (what is wanted, what is
loaded, where the Sites list's highlight is), read by what paints the main
screen (app/controllers/painting.py) and by what turns the user's requests into a new
`wanted` (app/controllers/asking.py). The App makes one when asked (`RematApp.scene`), so
neither holds the App, and each says in this one place what it reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from remat_tui.app.state.loaded import Loaded
from remat_tui.app.state.site_state import site_scope
from remat_tui.app.state.wanted import Wanted, request_key
from remat_tui.core.model import Analysis
from remat_tui.core.setup import policies
from remat_tui.registry import Target

if TYPE_CHECKING:
    from remat_tui.core.model import Site


@dataclass(frozen=True)
class Scene:
    path: str  # the target file, as the command line named it
    wanted: Wanted  # what the user asked to see
    loaded: Loaded  # what is loaded and shown
    highlighted_site: int | None  # the Sites list's highlight: where name toggles apply

    @property
    def target(self) -> Target | None:
        return self.loaded.target

    @property
    def shown(self) -> Analysis | None:
        return self.loaded.shown

    @property
    def listed(self) -> Mapping[str, policies.PolicySpec]:
        return self.loaded.listed

    @property
    def devices(self) -> tuple[str, ...]:
        return self.loaded.devices

    @property
    def reloads(self) -> int:
        return self.loaded.reloads

    @property
    def launch_warnings(self) -> tuple[str, ...]:
        return self.loaded.launch_warnings

    @property
    def spec(self) -> policies.PolicySpec | None:
        """The outer policy wanted (None before a target is started)."""
        return self.wanted.spec if self.target is not None else None

    @property
    def scope(self) -> Site | None:
        """Where name toggles apply: every site of the highlighted site's
        function, or the outer policy (None) when the function has no sites."""
        return site_scope(self.shown, self.highlighted_site)

    def key_of(self, a: Analysis) -> tuple | None:
        """The request key the analysis `a` was made for."""
        return request_key(self.target.name, a.config, self.reloads) if self.target else None

    def baseline_key(self) -> tuple:
        """as_written everywhere: what the status line's change is measured against."""
        return self.wanted.baseline().key(self.reloads)
