"""Provides Config: what one analysis is asked for, as one immutable value.

The outer policy, the per-site overrides, the device and, where asked, a
structure (a scan rebuilt as nested or split scans, `setup.structure_specs`).

Policies are carried parsed (`PolicySpec`): text is parsed once, where it
enters (the command line, the app's inputs, the API's entry points, the
notebook widget: through `Config.make` or `policies.parse`), and a Config is
built only from PolicySpecs; its canonical spelling is derived from them.
Name toggles are not a field of their own: they compose into a policy
(`save_only_these_names` or `save_and_offload_only_these_names`), outer or at
a site, so every configuration has one canonical spelling.

The device is a canonical label (`cpu:0`, `tpu:v5e:2x2`; `Config.make`
resolves what the user typed), so equal devices make equal configs;
`jax_device` is the label resolved, once per Config. A Config is hashable
(the app's cache key), printable (a report's title) and cheap to enumerate
(what compare, suggest and diff produce lists of).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING

from remat_tui.core.setup import policies, structure_specs
from remat_tui.core.setup.structure_specs import Structure
from remat_tui.errors import RematError

if TYPE_CHECKING:
    import jax

    from remat_tui.core.places import Site

SiteKey = int | str  # a site id, or a checkpointed function's name (every site of it)
Spec = str | policies.PolicySpec  # what a user typed, or a spec parsed already
AS_WRITTEN = policies.PolicySpec(policies.AS_WRITTEN)
# Timed runs of a measured step after its warm-up, unless asked otherwise: the one
# statement of the default, here where the command line and the package root can
# read it without importing jax.
RUNS = 5


@dataclass(frozen=True, init=False)
class Config:
    spec: policies.PolicySpec  # the outer policy
    site_specs: tuple[tuple[SiteKey, policies.PolicySpec], ...]  # sorted, ids before names
    device: str | None  # a device label (cpu:0, tpu:v5e:2x2); None: JAX's default
    structure: Structure | None  # a scan rebuilt (nested, split); None: as the code has it

    def __init__(
        self,
        policy: policies.PolicySpec = AS_WRITTEN,
        sites: tuple[tuple[SiteKey, policies.PolicySpec], ...] = (),
        device: str | None = None,
        structure: Structure | None = None,
    ) -> None:
        """A Config of values already parsed and checked. Text (what a user
        typed, or a report's canonical spelling) goes through `make`."""
        for spec in (policy, *(v for _, v in sites)):
            if not isinstance(spec, policies.PolicySpec):
                raise TypeError(
                    f"Config takes PolicySpecs, not {spec!r}: parse text with Config.make"
                )
        if structure is not None and not isinstance(structure, Structure):
            raise TypeError(
                f"Config takes a Structure, not {structure!r}: parse text with Config.make"
            )
        object.__setattr__(self, "spec", policy)
        object.__setattr__(self, "site_specs", _sorted(dict(sites)))
        object.__setattr__(self, "device", device)
        object.__setattr__(self, "structure", structure)

    @classmethod
    def make(
        cls,
        policy: Spec = policies.AS_WRITTEN,
        sites: Mapping[SiteKey, Spec] | None = None,
        device: str | jax.Device | None = None,
        declared: dict[str, Callable] | None = None,
        structure: str | Structure | None = None,
    ) -> Config:
        """Parse and canonicalise what a user asked for: specs against the
        target's `declared` policies (a bad one raises RematError naming
        where), the device (a label, an index or a jax.Device) to its label,
        a structure spec (`nested(4)`) to a Structure."""
        outer = policies.as_spec(policy, declared)
        overrides = {}
        for key, spec in (sites or {}).items():
            key = _site_key(key)
            try:
                overrides[key] = policies.as_spec(spec, declared)
            except RematError as exc:
                raise RematError(f"site {key}: {exc.message}") from None
        if structure is not None:
            structure = structure_specs.parse(structure, declared)
        return cls(outer, tuple(overrides.items()), _device_label(device), structure)

    @cached_property
    def jax_device(self) -> jax.Device:
        """The device this config is analysed on (JAX's default for None):
        resolved once per Config, whatever asks."""
        from remat_tui.core.setup.devices import resolve_device

        return resolve_device(self.device)

    def __getstate__(self) -> dict:
        # A jax.Device does not travel to a worker process: the label does.
        return {k: v for k, v in self.__dict__.items() if k != "jax_device"}

    @property
    def policy(self) -> str:
        """The outer policy's canonical spelling."""
        return self.spec.canonical

    @property
    def sites(self) -> tuple[tuple[SiteKey, str], ...]:
        """The site overrides as (site key, canonical spelling), sorted."""
        return tuple((key, spec.canonical) for key, spec in self.site_specs)

    @property
    def site_overrides(self) -> dict[SiteKey, str]:
        return dict(self.sites)

    def with_policy(self, policy: policies.PolicySpec) -> Config:
        return Config(policy, self.site_specs, self.device, self.structure)

    def with_structure(self, structure: Structure | None) -> Config:
        return Config(self.spec, self.site_specs, self.device, structure)

    def at_function(
        self, sites: Iterable[Site], function: str, spec: policies.PolicySpec
    ) -> Config:
        """This config with `spec` at every site of `function` (`sites`: the
        analysis's Site list). An id set for one of them would win over the
        function's name, so those go."""
        ids = {s.id for s in sites if s.function == function}
        overrides = {k: v for k, v in self.site_specs if k not in ids}
        overrides[function] = spec
        return Config(self.spec, tuple(overrides.items()), self.device, self.structure)

    def with_sites(self, overrides: Mapping[SiteKey, policies.PolicySpec]) -> Config:
        """This config with exactly these (already checked) site overrides."""
        return Config(self.spec, tuple(overrides.items()), self.device, self.structure)

    def with_device(self, device: str | None) -> Config:
        return Config(self.spec, self.site_specs, device, self.structure)

    def recomputing_offloads(self, declared: dict[str, Callable] | None = None) -> Config:
        """This config with every offload, outer or at a site, recomputed
        instead (a policy the target declares is opaque: kept as is)."""

        def swap(spec: policies.PolicySpec) -> policies.PolicySpec:
            return spec if spec.declared else spec.recomputing_offloads()

        structure = self.structure
        if structure is not None and structure.first is not None:  # a split
            first, rest = structure.parts
            structure = replace(structure, first=swap(first), rest=swap(rest))
        return Config(
            swap(self.spec),
            tuple((k, swap(v)) for k, v in self.site_specs),
            self.device,
            structure,
        )

    def label(self) -> str:
        """One line naming the whole configuration."""
        parts = [f"policy {self.policy}"]
        parts += [f"site {key}: {spec}" for key, spec in self.sites]
        if self.structure is not None:
            parts.append(f"structure {self.structure}")
        if self.device:
            parts.append(self.device)
        return "; ".join(parts)


def _device_label(device: str | jax.Device | None) -> str | None:
    """The canonical label of the device the user named (devices.py's
    `device_label`); None stays None, JAX's default."""
    if device is None:
        return None
    from remat_tui.core.setup.devices import device_label

    return device_label(device)


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


def _sorted(overrides: dict) -> tuple:
    # ids before names, so the spelling is one whatever order they were given in
    return tuple(sorted(overrides.items(), key=lambda kv: (isinstance(kv[0], str), str(kv[0]))))
