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


def test_a_gather_in_fill_mode_is_named_as_xla_names_its_lowering():
    """jnp.take's default mode (an embedding lookup): JAX lowers the gather
    as a select of the in-bounds rows, and the op_name XLA gives the value
    it returns is among `hlo_primitives("gather")` (JAX's own lowering,
    compiled, is the oracle)."""
    table = jax.numpy.ones((16, 8), jax.numpy.float32)
    tokens = jax.numpy.zeros((4,), jax.numpy.int32)
    lowered = jax.jit(lambda t, i: jax.numpy.take(t, i, axis=0)).lower(table, tokens)
    module = hlo_text.parse_hlo(lowered.compile().as_text())
    path = hv.computing(module, hv.Calls(module), module.root)
    assert path and hlo_text.primitive(path[-1].op_name) in hv.hlo_primitives("gather")


def test_a_copys_sync_flag_holds_no_value():
    """An asynchronous copy's {2} is its context (a u32 sync flag TPU keeps in
    its own memory): it holds no value, so names no residual; {0} and {1}
    are the copied value."""
    text = """HloModule m, is_scheduled=true

ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  %t = f32[8]{0} tanh(%p), metadata={op_name="jit(step)/jvp()/tanh"}
  %cs = (f32[8]{0:S(1)}, f32[8]{0}, u32[]{:S(2)}) copy-start(%t)
  ROOT %cd = f32[8]{0:S(1)} copy-done(%cs)
}
"""
    module = hlo_text.parse_hlo(text)
    calls = hv.Calls(module)
    assert [i.name for i in hv.computing(module, calls, "cs", (0,))] == ["t"]
    assert hv.computing(module, calls, "cs", (2,)) == []


def test_the_backward_part_starts_where_instructions_own_op_names_say():
    """Slices and copies carry no op_name and run when their reader needs
    them: slices of forward values read by the backward part (as TPU slices
    the wide blocks' weights) inherit the forward phase of their operand,
    and counted so they moved the backward part's start to the end, making
    every residual 'freed before the backward part'."""
    from remat_tui.core.xla.buffers import kinds as buffer_kinds

    forward = '{op_name="jit(step)/jvp()/tanh"}'
    backward = '{op_name="jit(step)/transpose(jvp())/mul"}'
    lines = ["HloModule m, is_scheduled=true", "", "ENTRY %main (p: f32[8]) -> f32[8] {"]
    lines.append("  %p = f32[8]{0} parameter(0)")
    sequence = []
    for k in range(3):
        lines.append(f"  %f{k} = f32[8]{{0}} tanh(%p), metadata={forward}")
        sequence.append(f"f{k}")
    for k in range(3):
        lines.append(f"  %b{k} = f32[8]{{0}} multiply(%f{k}, %p), metadata={backward}")
        sequence.append(f"b{k}")
        for j in range(3):
            lines.append(f"  %s{k}{j} = f32[4]{{0}} slice(%f{j}), slice={{[0:4]}}")
            sequence.append(f"s{k}{j}")
    lines += ["  ROOT %r = f32[8]{0} copy(%b2)", "}", ""]
    module = hlo_text.parse_hlo("\n".join(lines))
    assert buffer_kinds.backward_from(tuple(sequence), buffer_kinds.own_phases(module)) == 3
    inherited = buffer_kinds.phases_of(module)
    assert buffer_kinds.backward_from(tuple(sequence), inherited) > 3  # what it was


def test_the_backward_part_starts_where_backward_work_reads_forward_values():
    """XLA on CPU runs backward work that reads no forward value (a weight's
    transpose) before any forward work, and a checkpoint's recomputation
    beside the forward work it repeats (it reads only the block's input):
    here more such instructions than forward ones, all under transpose(...).
    Neither places the backward part: it starts at the first backward work
    reading a forward value (before the fix: at the first weight transpose,
    step 1)."""
    from remat_tui.core.xla.buffers import kinds as buffer_kinds

    forward = '{op_name="jit(step)/jvp()/tanh"}'
    backward = '{op_name="jit(step)/transpose(jvp())/mul"}'
    weight = '{op_name="jit(step)/transpose(jvp())/transpose"}'
    again = '{op_name="jit(step)/transpose(jvp())/checkpoint/rematted_computation/tanh"}'
    lines = ["HloModule m, is_scheduled=true", "", "ENTRY %main (p: f32[8]) -> f32[8] {"]
    lines.append("  %p = f32[8]{0} parameter(0)")
    sequence = ["p"]
    for k in range(4):  # the weights' transposes, first
        lines.append(f"  %w{k} = f32[8]{{0}} negate(%p), metadata={weight}")
        sequence.append(f"w{k}")
    previous = "p"
    for k in range(3):  # each layer's recomputation, and the layer right after it
        lines.append(f"  %r{k}a = f32[8]{{0}} tanh(%{previous}), metadata={again}")
        lines.append(f"  %r{k}b = f32[8]{{0}} negate(%r{k}a), metadata={again}")
        lines.append(f"  %f{k} = f32[8]{{0}} tanh(%{previous}), metadata={forward}")
        sequence += [f"r{k}a", f"r{k}b", f"f{k}"]
        previous = f"f{k}"
    for k in range(3):
        lines.append(f"  %b{k} = f32[8]{{0}} multiply(%f{2 - k}, %r{2 - k}b), metadata={backward}")
        sequence.append(f"b{k}")
    lines += ["  ROOT %t = (f32[8]{0}, f32[8]{0}) tuple(%b2, %w3)", "}", ""]
    sequence.append("t")
    module = hlo_text.parse_hlo("\n".join(lines))
    sequence = tuple(sequence)
    start = buffer_kinds.backward_from(sequence, buffer_kinds.start_marks(module, sequence))
    assert sequence[start] == "b0"
    assert buffer_kinds.backward_from(sequence, buffer_kinds.own_phases(module)) == 1  # before

    # A program whose forward part computes nothing the backward part reads
    # (the whole step under nothing_saveable, without its output): its
    # backward part starts with the recomputation.
    only = ("p", "r0a", "r0b", "b0")
    lines = [
        "HloModule m, is_scheduled=true",
        "",
        "ENTRY %main (p: f32[8]) -> f32[8] {",
        "  %p = f32[8]{0} parameter(0)",
        f"  %r0a = f32[8]{{0}} tanh(%p), metadata={again}",
        f"  %r0b = f32[8]{{0}} negate(%r0a), metadata={again}",
        f"  ROOT %b0 = f32[8]{{0}} multiply(%r0b, %p), metadata={backward}",
        "}",
        "",
    ]
    module = hlo_text.parse_hlo("\n".join(lines))
    assert buffer_kinds.backward_from(only, buffer_kinds.start_marks(module, only)) == 1
