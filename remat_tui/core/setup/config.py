"""Provides Config: what one analysis is asked for, as one immutable value.

The outer policy, the per-site overrides and the device. Name toggles are not
a field of their own: they compose into a policy spec (`save_only_these_names`
or `save_and_offload_only_these_names`), outer or at a site, so every
configuration has one canonical spelling. A Config is hashable (the app's
cache key), printable (a report's title) and cheap to enumerate (what
compare, suggest and diff will produce lists of).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from remat_tui.core.setup import policies
from remat_tui.errors import RematError

SiteKey = int | str  # a site id, or a checkpointed function's name (every site of it)


@dataclass(frozen=True)
class Config:
    policy: str = policies.AS_WRITTEN  # canonical outer spec
    sites: tuple[tuple[SiteKey, str], ...] = ()  # (site key, canonical spec), sorted
    device: str | None = None  # None: JAX's default device

    @classmethod
    def make(
        cls,
        policy: str | policies.PolicySpec = policies.AS_WRITTEN,
        sites: Mapping[SiteKey, str | policies.PolicySpec] | None = None,
        device: str | None = None,
        declared: dict[str, Callable] | None = None,
    ) -> Config:
        """Parse and canonicalise; a bad spec raises RematError naming where."""
        outer = _spec(policy, declared).canonical
        overrides = {}
        for key, spec in (sites or {}).items():
            key = _site_key(key)
            try:
                overrides[key] = _spec(spec, declared).canonical
            except RematError as exc:
                raise RematError(f"site {key}: {exc.message}") from None
        return cls(outer, _sorted(overrides), device)

    @property
    def site_overrides(self) -> dict[SiteKey, str]:
        return dict(self.sites)

    def with_policy(self, policy: str) -> Config:
        return Config(policy, self.sites, self.device)

    def at_function(self, sites, function: str, spec: str) -> Config:
        """This config with `spec` at every site of `function` (`sites`: the
        analysis's Site list). An id set for one of them would win over the
        function's name, so those go."""
        ids = {s.id for s in sites if s.function == function}
        overrides = {k: v for k, v in self.sites if k not in ids}
        overrides[function] = spec
        return Config(self.policy, _sorted(overrides), self.device)

    def with_sites(self, overrides: Mapping[SiteKey, str]) -> Config:
        """This config with exactly these (already canonical) site overrides."""
        return Config(self.policy, _sorted(dict(overrides)), self.device)

    def with_device(self, device: str | None) -> Config:
        return Config(self.policy, self.sites, device)

    def recomputing_offloads(self, declared: dict[str, Callable] | None = None) -> Config:
        """This config with every offload, outer or at a site, recomputed
        instead (a policy the target declares is opaque: kept as is)."""

        def swap(text: str) -> str:
            spec = policies.parse(text, declared)
            return text if spec.declared else spec.recomputing_offloads().canonical

        return Config(swap(self.policy), tuple((k, swap(v)) for k, v in self.sites), self.device)

    def label(self) -> str:
        """One line naming the whole configuration."""
        parts = [f"policy {self.policy}"]
        parts += [f"site {key}: {spec}" for key, spec in self.sites]
        if self.device:
            parts.append(self.device)
        return "; ".join(parts)


def parse_site_option(text: str) -> tuple[SiteKey, str]:
    """`ID=SPEC` or `FUNCTION=SPEC`, as the CLI's --site takes it."""
    key, sep, spec = text.partition("=")
    if not sep or not key.strip() or not spec.strip():
        raise RematError(
            f"--site {text!r}: expected ID=SPEC or FUNCTION=SPEC, "
            "e.g. --site block=nothing_saveable or --site 1=as_written."
        )
    return _site_key(key), spec.strip()


def _site_key(key: SiteKey) -> SiteKey:
    if isinstance(key, int):
        return key
    key = str(key).strip()
    return int(key) if key.isdigit() else key


def _spec(spec, declared) -> policies.PolicySpec:
    return spec if isinstance(spec, policies.PolicySpec) else policies.parse(spec, declared)


def _sorted(overrides: dict) -> tuple:
    # ids before names, so the spelling is one whatever order they were given in
    return tuple(sorted(overrides.items(), key=lambda kv: (isinstance(kv[0], str), str(kv[0]))))
