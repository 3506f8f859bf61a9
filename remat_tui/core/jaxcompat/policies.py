"""Provides what a policy object found in a traced program is: JAX builds
its policies as functions, closures and (in some releases) small classes, and
none of that is public. Two adapters: JAX 0.10 made the dots and name-list
policies classes (`DotsSaveable`, `SaveOnlyTheseNames`, ...); JAX 0.11+ makes
them functions and closures again, with other closure variable names."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import jax

from remat_tui.core.jaxcompat.version import expects

# A checkpoint policy, as jax.checkpoint takes it: called with (primitive,
# *input avals, **params), answering a bool or one of JAX's saveable objects.
Policy = Callable[..., Any]

# The closure variables of each factory's policy, by release: (saved, not saved)
_NAME_LIST_VARS = {
    "save_only_these_names": ("saveable_names", "names_which_can_be_saved"),
    "save_any_names_but_these": ("names", "names_not_to_save"),
}


@expects("a checkpoint policy built by jax.checkpoint_policies")
def describe(policy: Any) -> tuple[str, dict] | None:  # what JAX built, read by its class
    """(the jax.checkpoint_policies name that built `policy`, its arguments), or
    None for a policy of the user's own. `None` is JAX's default,
    nothing_saveable."""
    cp = jax.checkpoint_policies
    if policy is None or policy is cp.nothing_saveable:
        return "nothing_saveable", {}
    if policy is cp.everything_saveable:
        return "everything_saveable", {}
    if policy is cp.dots_saveable:
        return "dots_saveable", {}
    if policy is cp.dots_with_no_batch_dims_saveable:
        return "dots_with_no_batch_dims_saveable", {}
    kind = type(policy).__name__
    if kind == "DotsSaveable":  # JAX 0.10
        no_batch = policy.only_if_no_batch_dims
        return ("dots_with_no_batch_dims_saveable" if no_batch else "dots_saveable"), {}
    if kind == "SaveOnlyTheseNames":  # JAX 0.10
        return "save_only_these_names", {"names": tuple(policy.saveable_names)}
    if kind == "SaveAnyNamesButThese":  # JAX 0.10
        return "save_any_names_but_these", {"names": tuple(policy.names)}
    factory = getattr(policy, "__qualname__", "").split(".<locals>.")[0]
    if not inspect.isfunction(policy) or ".<locals>." not in getattr(policy, "__qualname__", ""):
        return None
    bound = inspect.getclosurevars(policy).nonlocals
    if factory in _NAME_LIST_VARS:
        var = next((v for v in _NAME_LIST_VARS[factory] if v in bound), None)
        if var is None:
            raise KeyError(f"{factory}'s names among {sorted(bound)}")
        return factory, {"names": tuple(bound[var])}
    if factory == "offload_dot_with_no_batch_dims":
        return factory, {"src": bound["offload_src"], "dst": bound["offload_dst"]}
    if factory == "save_and_offload_only_these_names":
        return factory, {
            "names": tuple(bound["names_which_can_be_saved"]),
            "offloaded": tuple(bound["names_which_can_be_offloaded"]),
            "src": bound["offload_src"],
            "dst": bound["offload_dst"],
        }
    if factory == "save_from_both_policies":
        return factory, {"parts": (bound["policy_1"], bound["policy_2"])}
    return None
