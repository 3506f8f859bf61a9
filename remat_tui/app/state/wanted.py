"""Provides Wanted: what the user asked the app to show, as one frozen value.

The target, the Config (outer policy and site overrides, parsed once where
they were typed or picked, and the device), whether each configuration shown
is compiled (`p`) and whether it is run and timed on its device too (`x`).
Keys, lists and palette commands make a new one and assign it to
`RematApp.wanted`; the App's watcher asks for its analysis. The
request key (target, Config, reloads) is derived here and nowhere else. Name
states are not kept: they are read from the policy in force where name
toggles apply (app/state/site_state.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config


def request_key(target: str | None, config: Config, reloads: int) -> tuple:
    """(target, Config, reloads): the key of an analysis and of its compile in
    the app's caches. `reloads` counts the file's imports: an answer traced
    from the code before a save is never taken for the new code's."""
    return (target, config, reloads)


@dataclass(frozen=True)
class Wanted:
    target: str | None = None
    config: Config = Config()  # outer policy, site overrides, device (a label: cpu:0)
    compiled: bool = False  # `p`: compile every configuration shown
    measured: bool = False  # `x`: run it on the device too, and time it (with `p`)

    @property
    def spec(self) -> policies.PolicySpec:
        """The outer policy."""
        return self.config.spec

    @property
    def device(self) -> str | None:
        return self.config.device

    @property
    def site_overrides(self) -> dict:
        return self.config.site_overrides

    def with_policy(self, spec: policies.PolicySpec) -> Wanted:
        return replace(self, config=self.config.with_policy(spec))

    def with_sites(self, overrides: dict) -> Wanted:
        """Overrides given as {site id or function name: PolicySpec}."""
        return replace(self, config=self.config.with_sites(overrides))

    def with_device(self, device: str | None) -> Wanted:
        return replace(self, config=self.config.with_device(device))

    def with_config(self, config: Config) -> Wanted:
        """A whole Config (a row of compare, suggest's answer) asked for; its
        device, when it names none, the one in use."""
        return replace(self, config=config if config.device else config.with_device(self.device))

    def key(self, reloads: int) -> tuple:
        """What an analysis is asked for, and its cache key (`request_key`)."""
        return request_key(self.target, self.config, reloads)

    def baseline(self) -> Wanted:
        """as_written everywhere, on the same device: what the status line's
        change is measured against."""
        return replace(self, config=Config(device=self.device))
