"""Provides how compare, suggest and diff name a configuration in a table:
`config_label` (a row's policy, site overrides and structure; a names policy
as the names it saves and offloads, PolicySpec.short). Reports and JSON keep
the canonical spec."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from remat_tui.core.search.rows import Row


def config_label(row: Row) -> str:
    """A row's configuration in a table: its outer policy (left out where
    only its sites or its structure change the code as written), its site
    overrides and its structure (`nested(4)`)."""
    config = row.config
    changed = config.site_specs or config.structure is not None
    parts = [] if config.policy == "as_written" and changed else [config.spec.short()]
    parts += [f"site {k}: {spec.short()}" for k, spec in config.site_specs]
    if config.structure is not None:
        parts.append(str(config.structure))
    return "; ".join(parts)
