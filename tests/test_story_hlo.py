"""Reading XLA's optimized HLO for Contract 14 (issue 34) on every JAX: a
tuple's element as JAX 0.12's dumps write it (`%t#1`, no get-tuple-element),
and the primitives JAX lowers by composing others, which XLA's op_name names
by the composition's root. No model compiled: a tiny program each."""

import jax
import pytest

from remat_tui.core.jaxcompat import hlo_text
from remat_tui.core.jaxcompat import hlo_values as hv

# A loop stacking its carry, as JAX 0.12's dumps print it: the body reads
# the carried tuple's elements as `%arg#1`.
LOOP_012 = """HloModule jit_step, is_scheduled=true

%body (arg: (s32[], f32[8], f32[4,8])) -> (s32[], f32[8], f32[4,8]) {
  %arg = (s32[], f32[8]{0}, f32[4,8]{1,0}) parameter(0)
  %copy.1 = f32[8]{0} copy(%arg#1)
  %next = f32[8]{0} tanh(%copy.1), metadata={op_name="jit(step)/jvp()/while/body/tanh"}
  %stacked = f32[4,8]{1,0} dynamic-update-slice(%arg#2, %copy.1, %arg#0)
  ROOT %out = (s32[], f32[8]{0}, f32[4,8]{1,0}) tuple(%arg#0, %next, %stacked)
}

%cond (arg.2: (s32[], f32[8], f32[4,8])) -> pred[] {
  %arg.2 = (s32[], f32[8]{0}, f32[4,8]{1,0}) parameter(0)
  ROOT %lt = pred[] compare(%arg.2#0, %arg.2#0), direction=LT
}

ENTRY %main (p: (s32[], f32[8], f32[4,8])) -> f32[4,8] {
  %p = (s32[], f32[8]{0}, f32[4,8]{1,0}) parameter(0)
  %loop = (s32[], f32[8]{0}, f32[4,8]{1,0}) while(%p), condition=%cond, body=%body
  ROOT %result = f32[4,8]{1,0} copy(%loop#2)
}
"""


def test_a_tuple_element_written_with_a_hash_is_followed():
    """The stacked output's value is the carry the body computed: the tanh,
    found through `%arg#1` (read as the tuple itself before, which stopped
    the walk at the copy)."""
    module = hlo_text.parse_hlo(LOOP_012)
    element = module.instructions["arg#1"]
    assert (element.opcode, element.number, element.shape) == ("get-tuple-element", 1, "f32[8]")
    assert module.instructions["copy.1"].operands == ("arg#1",)
    path = hv.computing(module, hv.Calls(module), "loop", (2,))
    assert path[-1].name == "next" and hlo_text.primitive(path[-1].op_name) == "tanh"


@pytest.mark.parametrize("name", ["one_minus_square", "logistic", "asin", "tanh"])
def test_an_equation_is_named_as_xla_names_its_lowering(name):
    """The oracle is JAX's own lowering, compiled: the op_name XLA gives the
    value an equation of `name` makes is among `hlo_primitives(name)`."""
    lax = jax.lax
    if not hasattr(lax, name):
        pytest.skip(f"JAX {jax.__version__} has no lax.{name}")
    x = jax.numpy.full((4, 8), 0.5, jax.numpy.float32)
    module = hlo_text.parse_hlo(jax.jit(getattr(lax, name)).lower(x).compile().as_text())
    root = module.instructions[module.root]
    assert hlo_text.primitive(root.op_name) in hv.hlo_primitives(name)
