"""Provides how compare, suggest and fit name a configuration in a table:
`config_label` (a row's policy, site overrides and structure) and `short_spec` (a names
policy as the names it saves and offloads). Reports and JSON keep the
canonical spec."""

from __future__ import annotations


def short_spec(spec: str) -> str:
    """A names policy as the names it saves and offloads (`save qkv · offload h`);
    any other spec as it is. For tables: reports and JSON keep the canonical spec."""
    from remat_tui.core.setup import policies

    try:
        parsed = policies.parse(spec, policies.AnyName())
    except Exception:  # a custom:<name> policy read off the code
        return spec
    if parsed.kind not in ("save_only_these_names", policies.OFFLOAD_NAMES):
        return spec
    parts = []
    if parsed.names:
        parts.append("save " + ", ".join(parsed.names))
    if parsed.offloaded:
        parts.append("offload " + ", ".join(parsed.offloaded))
    return " · ".join(parts) or "save no names"


def config_label(row) -> str:
    """A row's configuration in a table: its outer policy (left out where
    only its sites or its structure change the code as written), its site
    overrides and its structure (`nested(4)`)."""
    config = row.config
    changed = config.sites or config.structure is not None
    parts = [] if config.policy == "as_written" and changed else [short_spec(config.policy)]
    parts += [f"site {k}: {short_spec(v)}" for k, v in config.sites]
    if config.structure is not None:
        parts.append(str(config.structure))
    return "; ".join(parts)
