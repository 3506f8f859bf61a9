"""Provides `Skips`: the candidates a user drops from compare, suggest and
fit (`--skip SPEC`, `--skip ID|FUNCTION=SPEC`; the API's `skip=`), for a
configuration they know they do not want, or one that fails in a way the
search cannot tell apart from a real answer (Contract 16).

`SPEC` drops every candidate that has that policy anywhere: around the whole
function or at a checkpoint; `ID|FUNCTION=SPEC` only those with it at that
site (by its id, or at every site of that function). Spellings of the same
decisions match (`save_only_these_names()` is `nothing_saveable`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config, SiteKey, parse_site_option

if TYPE_CHECKING:
    from remat_tui.core.places import Site


@dataclass(frozen=True)
class Skip:
    """One `--skip`: a policy, and the site it applies at (None: anywhere)."""

    spec: policies.PolicySpec
    site: SiteKey | None = None

    def drops(self, config: Config, sites: Sequence[Site]) -> bool:
        wanted = policies.same_decisions(self.spec)
        if self.site is None:
            specs = [config.spec, *(spec for _, spec in config.site_specs)]
            if config.structure is not None and config.structure.first is not None:
                specs += list(config.structure.parts)
            return any(policies.same_decisions(s) == wanted for s in specs)
        keys = _keys_of(self.site, sites)
        return any(
            key in keys and policies.same_decisions(spec) == wanted
            for key, spec in config.site_specs
        )

    def drops_at(
        self, spec: policies.PolicySpec, key: SiteKey | None, sites: Sequence[Site]
    ) -> bool:
        """Whether it drops `spec` at the site `key` (None: around the whole
        function)."""
        if policies.same_decisions(spec) != policies.same_decisions(self.spec):
            return False
        return self.site is None or (key is not None and key in _keys_of(self.site, sites))

    def __str__(self) -> str:
        return self.spec.canonical if self.site is None else f"{self.site}={self.spec.canonical}"


class Skips:
    """The skips a search was given; `keep(configs, sites)` drops what they
    name and remembers what it dropped, for the answer to say."""

    def __init__(self, skips: Iterable[Skip] = ()) -> None:
        self.skips = tuple(skips)
        self.dropped: list[Config] = []

    def __bool__(self) -> bool:
        return bool(self.skips)

    def keep(self, configs: Iterable[Config], sites: Sequence[Site]) -> list[Config]:
        out = []
        for config in configs:
            if any(s.drops(config, sites) for s in self.skips):
                if config not in self.dropped:
                    self.dropped.append(config)
            else:
                out.append(config)
        return out

    def drops_at(
        self, spec: policies.PolicySpec, key: SiteKey | None, sites: Sequence[Site]
    ) -> bool:
        """Whether a skip drops `spec` at the site `key` (None: outer)."""
        return any(s.drops_at(spec, key, sites) for s in self.skips)

    def words(self) -> str:
        """`2 left out by --skip everything_saveable`, or ''."""
        if not self.dropped:
            return ""
        given = ", ".join(f"--skip {s}" for s in self.skips)
        return f"{len(self.dropped)} left out by {given}"


def parse_skips(
    texts: Iterable[str | Skip] | None, declared: dict[str, Callable] | None = None
) -> Skips:
    """`SPEC` or `ID|FUNCTION=SPEC`, as the CLI and the API take them; a bad
    one raises RematError naming it."""
    out = []
    for text in texts or ():
        if isinstance(text, Skip):
            out.append(text)
            continue
        head = text.split("(", 1)[0]
        if "=" in head:
            key, spec = parse_site_option(text)
            out.append(Skip(policies.as_spec(spec, declared), key))
        else:
            out.append(Skip(policies.as_spec(text, declared)))
    return Skips(out)


def _keys_of(key: SiteKey, sites: Sequence[Site]) -> set[SiteKey]:
    """The override keys that name the site(s) `key` names: the id and its
    function's name, or the function's name and its sites' ids."""
    keys: set[SiteKey] = {key}
    for site in sites:
        if key in (site.id, site.function):
            keys |= {site.id, site.function}
    return keys
