"""Provides Wanted: what the user asked the app to show, as one frozen value.

The target, the outer policy, the site overrides, the device and whether each
configuration shown is compiled (`p`). Keys, lists and palette commands make
a new one and assign it to `RematApp.wanted`; the App's watcher asks for its
analysis. The request key (target, Config, reloads) is derived here and
nowhere else. Name states are not kept: they are read from the policy in
force where name toggles apply (app/site_state.py).
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
    policy: str = policies.AS_WRITTEN  # a canonical spec
    sites: tuple = ()  # ((site id or function name, canonical spec), ...), as Config keeps them
    device: str | None = None  # a label: cpu:0, tpu:v5e:2x2
    compiled: bool = False  # `p`: compile every configuration shown

    @property
    def config(self) -> Config:
        return Config(self.policy, self.sites, self.device)

    @property
    def site_overrides(self) -> dict:
        return dict(self.sites)

    def with_sites(self, overrides: dict) -> Wanted:
        """Overrides given as {site id or function name: spec}, kept canonical."""
        return replace(self, sites=Config().with_sites(overrides).sites)

    def with_config(self, config: Config) -> Wanted:
        """A whole Config (a row of compare, suggest's answer) asked for; its
        device, when it names none, the one in use."""
        return replace(
            self, policy=config.policy, sites=config.sites, device=config.device or self.device
        )

    def key(self, reloads: int) -> tuple:
        """What an analysis is asked for, and its cache key (`request_key`)."""
        return request_key(self.target, self.config, reloads)

    def baseline(self) -> Wanted:
        """as_written everywhere, on the same device: what the status line's
        change is measured against."""
        return replace(self, policy=policies.AS_WRITTEN, sites=())
