"""Provides everything remat-tui needs from JAX's private structure, in one
package: JAX's private modules (read in `private.py` alone), private attributes,
primitive and param names, policy objects and residual wording. Nothing
outside it touches those (checked by tests/unit/test_import_hygiene.py), so a new
JAX means changes here only.

Each JAX difference is one named adapter, in the module it concerns:
- objects: JAX 0.11 merged ClosedJaxpr into Jaxpr;
- remat: remat2 equations, or remat3's `call_hi_primitive` (JAX_REMAT3=1),
  and what each asks a policy about a name (`policy_question`);
- policies: policy classes (0.10) or closures (0.11+);
- residual_words: one reduce_precision looked through (0.10) or a chain (0.11+);
- bodies: the one table of how each higher-order primitive holds its bodies;
- scans: a scan's loop params, read for the structures that rebuild it;
- shard_maps: the context a shard_map traces its body in, entered again;
- hlo_text: a tuple's element as XLA's dump writes it, a get-tuple-element
  (0.10) or `%name#k` (0.12);
- hlo_values: the primitives JAX lowers by composing others, named in XLA's
  op_name by the composition's root (one_minus_square, 0.11+).
"""

from remat_tui.core.jaxcompat import policies as policy_objects
from remat_tui.core.jaxcompat import primitives, residual_words, scans, shard_maps
from remat_tui.core.jaxcompat.bodies import (
    HI_BODY,
    Body,
    bodies,
    differentiates_bodies,
    is_jit,
    nested_eqns,
    replace_body,
    scan_layout,
)
from remat_tui.core.jaxcompat.objects import (
    Atom,
    DropVar,
    Jaxpr,
    JaxprEqn,
    Literal,
    Var,
    consts_of,
    eval_jaxpr,
    fresh_var,
    is_host,
    open_jaxpr,
    short,
)
from remat_tui.core.jaxcompat.policies import Policy
from remat_tui.core.jaxcompat.printing import EqnRef, Region, format_jaxpr
from remat_tui.core.jaxcompat.program import Linear, linear_program, primitive_name, tpu_chips_here
from remat_tui.core.jaxcompat.remat import (
    checkpoint_name,
    is_remat,
    policy_question,
    remat3_enabled,
    remat_body,
    remat_function,
    remat_policy,
    remat_prevent_cse,
    with_policy,
)
from remat_tui.core.jaxcompat.sources import (
    calling_file,
    frames_key,
    outermost_own_function,
    own_frames,
    own_function_names,
    own_source,
    summarize,
    user_source,
    users_frames,
)
from remat_tui.core.jaxcompat.version import JaxChanged, expects, untested_message, version_tuple

__all__ = [
    "HI_BODY", "Atom", "Body", "DropVar", "EqnRef", "JaxChanged", "Jaxpr", "JaxprEqn", "Literal",
    "Policy", "Region", "Var",
    "bodies", "calling_file", "checkpoint_name", "consts_of", "differentiates_bodies",
    "eval_jaxpr", "expects", "format_jaxpr", "frames_key", "fresh_var", "is_host", "is_jit",
    "is_remat",
    "Linear", "linear_program", "nested_eqns", "open_jaxpr", "outermost_own_function", "own_frames",
    "own_function_names", "own_source", "policy_objects", "policy_question", "primitive_name",
    "primitives",
    "remat3_enabled", "remat_body", "remat_function", "remat_policy", "remat_prevent_cse",
    "replace_body",
    "residual_words", "scan_layout", "scans", "shard_maps", "short", "summarize",
    "tpu_chips_here",
    "untested_message", "user_source", "users_frames", "version_tuple", "with_policy",
]  # fmt: skip
