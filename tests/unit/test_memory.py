"""Where the compiled memory goes (Contract 7), read from XLA's own record of
each compile: the live-bytes curve, the backward part's first step, and the
buffers live at the peak with their categories, checked against XLA's own
totals and against what autodiff must keep."""

import json
import math

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from remat_tui.core.jaxcompat import buffers, hlo_text
from remat_tui.core.xla.buffers import kinds as buffer_kinds
from remat_tui.core.xla.buffers import memory, occupancy
from remat_tui.core.xla.buffers.memory import (
    CATEGORIES,
    compile_with_memory,
    memory_and_reason,
    memory_of,
)

LAYERS, ROWS, WIDTH = 8, 256, 128
ACT = ROWS * WIDTH * 4  # bytes of one f32[256,128] activation


def layers(ws, x):
    for w in ws:
        x = jnp.tanh(x @ w)  # TANH_LINE
    return x


def scanned(stacked, x):
    def body(x, w):
        return jnp.tanh(x @ w), None  # SCAN_LINE

    return lax.scan(body, x, stacked)[0]


def _line(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}"))


def gradient(fn, keep_output: bool = True):
    """Contract 9's compiled gradient: the output, and jax.vjp applied to a
    cotangent of ones (jax.value_and_grad for a scalar output). Without the
    output (`keep_output=False`) the forward part's only work is what the
    backward part needs."""

    def g(*args):
        out, vjp = jax.vjp(fn, *args)
        grads = vjp(jnp.ones_like(out))
        return (out, grads) if keep_output else grads

    return jax.jit(g)


def weights():
    return [jax.ShapeDtypeStruct((WIDTH, WIDTH), jnp.float32) for _ in range(LAYERS)]


def activations():
    return jax.ShapeDtypeStruct((ROWS, WIDTH), jnp.float32)


def xla_peak(executable) -> int:
    # Contract 6 on CPU: argument + output + temp - alias.
    s = executable.memory_analysis()
    return (
        s.argument_size_in_bytes + s.output_size_in_bytes + s.temp_size_in_bytes
        - s.alias_size_in_bytes
    )  # fmt: skip


def compiled(fn, *args, keep_output: bool = True):
    executable = compile_with_memory(gradient(fn, keep_output).lower(*args))
    mem, why = memory_and_reason(executable)
    assert mem is not None, why
    return executable, mem


def check_adds_up(mem, ceiling: int):
    assert sum(b.bytes for b in mem.at_peak) == mem.peak_bytes
    assert set(mem.by_category) == set(CATEGORIES)
    assert sum(mem.by_category.values()) == mem.peak_bytes
    for c in CATEGORIES:
        assert mem.by_category[c] == sum(b.bytes for b in mem.at_peak if b.category == c)
    assert all(b.category in CATEGORIES and b.bytes > 0 for b in mem.at_peak)
    assert mem.peak_bytes <= ceiling
    # The curve: at most 512 points, in step order, the peak among them and on top.
    assert 0 < len(mem.curve) <= memory.MAX_CURVE_POINTS
    steps_seen = [s for s, _ in mem.curve]
    assert (
        steps_seen == sorted(set(steps_seen)) and 0 <= steps_seen[0] and steps_seen[-1] < mem.steps
    )
    assert (mem.peak_step, mem.peak_bytes) in mem.curve
    assert max(b for _, b in mem.curve) == mem.peak_bytes
    # Whatever is live at the peak is live at its step (reserved memory aside).
    for b in mem.at_peak:
        assert b.live[0] <= mem.peak_step <= b.live[1], b
        assert b.bytes <= b.size


@pytest.fixture(scope="module")
def plain():
    return compiled(layers, weights(), activations(), keep_output=False)


@pytest.fixture(scope="module")
def recomputing():
    """Contract 7's example, compiled without the output: with it kept, XLA's
    CPU compiler merges the backward part's recomputation of the layers with
    the forward part that computes the output (TPU's keeps both), and no
    recomputed buffer is left for the accounting to find."""
    policy = jax.checkpoint_policies.nothing_saveable
    fn = jax.checkpoint(layers, policy=policy)
    return compiled(fn, weights(), activations(), keep_output=False)


def test_without_a_policy_the_tanh_outputs_are_residuals_at_the_peak(plain):
    executable, mem = plain
    check_adds_up(mem, xla_peak(executable))
    assert mem.peak_bytes >= 0.9 * xla_peak(executable)

    residuals = [b for b in mem.at_peak if b.category == "residual"]
    # Each layer's tanh output is saved for the backward pass (the last one or
    # two may be consumed before the peak): at least LAYERS - 1 activations.
    assert len(residuals) >= LAYERS - 1
    assert mem.by_category["residual"] >= (LAYERS - 1) * ACT
    assert mem.by_category["recomputed"] == 0
    for b in residuals:
        assert b.shape == f"f32[{ROWS},{WIDTH}]" and b.bytes == ACT
        # Defined in the forward part, still live when the backward part starts.
        assert b.live[0] < mem.backward_from <= b.live[1]
        assert "jvp(" in b.op_name and "transpose(" not in b.op_name
        assert b.source.file.endswith("test_memory.py") and b.source.line == _line("TANH_LINE")
        assert b.stack[0] == b.source


def test_arguments_and_outputs_count_whole(plain):
    executable, mem = plain
    stats = executable.memory_analysis()
    weight_bytes = LAYERS * WIDTH * WIDTH * 4
    assert mem.by_category["argument"] == weight_bytes + ACT == stats.argument_size_in_bytes
    # The gradients' buffers are held from the start, written or not; one of them
    # (x's) may be lent to a forward value meanwhile.
    assert weight_bytes <= mem.by_category["output"] <= stats.output_size_in_bytes
    assert mem.peak_bytes >= stats.argument_size_in_bytes + stats.output_size_in_bytes - ACT
    arguments = [b for b in mem.at_peak if b.category == "argument"]
    assert {b.op for b in arguments} == {"parameter"}
    assert sorted(b.shape for b in arguments).count(f"f32[{WIDTH},{WIDTH}]") == LAYERS


def test_nothing_saveable_keeps_the_peak_with_recomputed_buffers(plain, recomputing):
    executable, mem = recomputing
    check_adds_up(mem, xla_peak(executable))
    assert mem.peak_bytes >= 0.9 * xla_peak(executable)

    assert mem.by_category["residual"] == 0
    recomputed = [b for b in mem.at_peak if b.category == "recomputed"]
    assert len(recomputed) >= LAYERS - 1
    assert mem.by_category["recomputed"] >= (LAYERS - 1) * ACT
    for b in recomputed:
        assert b.shape == f"f32[{ROWS},{WIDTH}]"
        assert "transpose(" in b.op_name and "rematted_computation" in b.op_name
        assert b.source.line == _line("TANH_LINE")
        assert b.live[0] >= mem.backward_from
    # Contract 7's example: the backward part recomputes every layer before it
    # needs the first, so the peak does not move; what moved is the category.
    assert abs(mem.peak_bytes - plain[1].peak_bytes) <= 0.1 * plain[1].peak_bytes
    assert mem.by_category["recomputed"] == plain[1].by_category["residual"]


def test_a_scanned_stack_of_residuals_is_one_buffer():
    stacked = jax.ShapeDtypeStruct((LAYERS, WIDTH, WIDTH), jnp.float32)
    executable, mem = compiled(scanned, stacked, activations())
    check_adds_up(mem, xla_peak(executable))
    assert mem.peak_bytes >= 0.9 * xla_peak(executable)

    residuals = [b for b in mem.at_peak if b.category == "residual"]
    assert residuals
    # The scan stacks each per-layer residual: one buffer of LAYERS activations,
    # never LAYERS separate ones.
    for b in residuals:
        assert b.shape == f"f32[{LAYERS},{ROWS},{WIDTH}]" and b.size == LAYERS * ACT
    assert not [b for b in mem.at_peak if b.shape == f"f32[{ROWS},{WIDTH}]"
                and b.category == "residual"]  # fmt: skip
    assert mem.by_category["residual"] % (LAYERS * ACT) == 0
    # The stacked weights' gradient is accumulated in the output's own buffer,
    # which holds the accumulator (zeros, at first) from the start.
    assert mem.by_category["output"] >= LAYERS * WIDTH * WIDTH * 4
    # Its source is the scan, where XLA's loop carries it.
    assert any(b.source and b.source.file.endswith("test_memory.py") for b in residuals)


def test_a_donated_argument_is_counted_once():
    def step(w, x):
        return w - 0.1 * jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)

    w = jax.ShapeDtypeStruct((WIDTH, WIDTH), jnp.float32)
    executable = compile_with_memory(jax.jit(step, donate_argnums=0).lower(w, activations()))
    mem = memory_of(executable)
    stats = executable.memory_analysis()
    assert stats.alias_size_in_bytes == WIDTH * WIDTH * 4
    check_adds_up(mem, xla_peak(executable))
    assert mem.peak_bytes >= 0.9 * xla_peak(executable)


def test_the_json_is_contract_7s():
    _, mem = compiled(lambda x: jnp.sin(x) * 2, jax.ShapeDtypeStruct((64, 64), jnp.float32))
    d = json.loads(json.dumps(mem.to_dict()))
    assert set(d) == {"peak_bytes", "peak_step", "steps", "backward_from", "curve", "at_peak",
                      "by_category", "other_spaces", "xla_rematerialized"}  # fmt: skip
    assert d["xla_rematerialized"] == []  # XLA's CPU compiler runs no rematerialization pass
    assert all(isinstance(p, list) and len(p) == 2 for p in d["curve"])
    assert set(d["by_category"]) == set(CATEGORIES)
    for b in d["at_peak"]:
        assert set(b) == {"bytes", "shape", "instruction", "op", "live", "category",
                          "residual", "source"}  # fmt: skip
        assert len(b["live"]) == 2 and b["residual"] is None
        assert b["source"] is None or set(b["source"]) == {"file", "line", "function"}


def test_an_executable_compiled_elsewhere_gives_a_reason():
    executable = jax.jit(jnp.sin).lower(jnp.ones(4)).compile()
    mem, why = memory_and_reason(executable)
    assert mem is None and "compile_with_memory" in why
    assert memory_of(executable) is None


def test_a_lowered_program_is_compiled_for_it():
    lowered = gradient(layers).lower(weights()[:2], activations())
    mem = memory_of(lowered)
    assert mem is not None and mem.backward_from is not None
    assert sum(b.bytes for b in mem.at_peak) == mem.peak_bytes


def test_the_curve_keeps_the_peak_when_thinned():
    curve = [i % 7 for i in range(5000)]
    curve[3333] = 10_000
    thin = occupancy.thin(curve, 3333)
    assert len(thin) <= memory.MAX_CURVE_POINTS
    assert (3333, 10_000) in thin
    assert [s for s, _ in thin] == sorted({s for s, _ in thin})
    # Each point is the highest of its run (about 10 steps, so it holds a 6).
    assert min(b for _, b in thin) == 6


# --- XLA's files, made up: what each parser must read ---------------------------

HLO = """HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[4]{0})->(f32[4]{0})}

FileNames
1 "/u/model.py"

FunctionNames
1 "outer"
2 "inner"

FileLocations
1 {file_name_id=1 function_name_id=1 line=10 end_line=10 column=1 end_column=9}
2 {file_name_id=1 function_name_id=2 line=3 end_line=3 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}


ENTRY %main.1 (p.1: f32[4]) -> (f32[4]) {
  %p.1 = f32[4]{0} parameter(0), metadata={op_name="x"}
  %a = f32[4]{0} exponential(%p.1), metadata={op_name="jit(f)/jvp()/exp" stack_frame_id=2}
  %b = f32[4]{0} tanh(%a), metadata={op_name="jit(f)/jvp()/tanh" source_file="/m.py" source_line=4}
  %copy.1 = f32[4]{0} copy(%b)
  %c = f32[4]{0} negate(%copy.1), metadata={op_name="jit(f)/transpose(jvp())/neg"}
  ROOT %t = (f32[4]{0}, /*index=1*/f32[4]{0}) tuple(%c, %c)
}
"""

LIVE = """HloLiveRange (max 6):
  InstructionSequence:
    0:p.1
    1:a
    2:b
    3:copy.1
    4:c
    5:t
  BufferLiveRange:
    p.1{}:0-6
    a{}:1-2
    b{}:2-3
    copy.1{}:3-4
    c{}:4-6
    t{}:5-6
    pair{}:3-3
  Live ranges at 2 (peak):
    p.1{}: 16 bytes (cumulative: 16 bytes)
    a{}: 16 bytes (cumulative: 32 bytes)
    b{}: 16 bytes (cumulative: 48 bytes)
"""

ASSIGNMENT = """BufferAssignment:
allocation 0: size 16, parameter 0, shape |f32[4]| at ShapeIndex {}:
 value: <0 p.1 @0> (size=16,offset=0): f32[4]{0}
allocation 1: size 16, maybe-live-out:
 value: <4 c @0> (size=16,offset=0): f32[4]{0}
allocation 2: size 16, output shape is |(f32[4], f32[4])|, maybe-live-out:
 value: <5 t{} @0> (size=16,offset=0): (f32[4]{0}, f32[4]{0})
allocation 3: size 64, preallocated-temp:
 value: <1 a @0> (size=16,offset=0): f32[4]{0}
 value: <2 b @0> (size=16,offset=0): f32[4]{0}
 value: <3 copy.1 @0> (size=16,offset=32): f32[4]{0}
 value: <7 pair{} @0> (size=8,offset=48): (f32[4]{0})
allocation 4: size 64, color 1, preallocated-temp:
 value: <6 a @1> (size=64,offset=0): f32[4]{0:S(1)}

Total bytes used: 176
"""


def made_up(tmp_path):
    for name, text in [("", HLO), ("-live-range", LIVE), ("-buffer-assignment", ASSIGNMENT)]:
        (tmp_path / f"module_0001.jit_f.cpu_after_optimizations{name}.txt").write_text(text)
    return buffers.read_dump(str(tmp_path))


def test_the_parsers_read_xlas_files(tmp_path):
    dump = made_up(tmp_path)
    assert dump.live.sequence == ("p.1", "a", "b", "copy.1", "c", "t")
    assert dump.live.ranges["b{}"] == (2, 3) and dump.live.end == 6
    assert (dump.live.peak_step, dump.live.peak_bytes) == (2, 48)
    allocations = {a.index: a for a in dump.allocations}
    assert allocations[0].parameter == 0 and allocations[0].whole_program
    assert allocations[2].maybe_live_out and allocations[2].values[0].key == "t{}"
    assert allocations[2].values[0].shape == "(f32[4], f32[4])"
    assert allocations[3].preallocated_temp and not allocations[3].whole_program
    assert allocations[4].color == 1 and allocations[4].values[0].shape == "f32[4]"
    module = dump.module
    assert module.entry == "main.1" and module.root == "t"
    assert module.instructions["t"].shape == "(f32[4], f32[4])"
    assert module.instructions["c"].operands == ("copy.1",)
    # A stack frame's parent is printed one higher than the proto's id.
    a = module.instructions["a"]
    assert [(f.line, f.function) for f in a.stack] == [(3, "inner"), (10, "outer")]
    assert module.instructions["b"].stack == (hlo_text.Frame("/m.py", 4),)


def test_made_up_memory_counts_shared_bytes_once(tmp_path):
    mem = memory.from_dump(made_up(tmp_path))
    held = 16 + 16 + 16  # the parameter, c's allocation, the output tuple
    # a and b share their bytes at step 2 (b overwrites a in place): counted once;
    # memory space 1 (64 bytes) is scratch, not in the curve, and neither is the
    # index table of a tuple in the temporaries (TPU's own peak leaves them out).
    assert [b for _, b in mem.curve] == [held, held + 16, held + 16, held + 32, held + 16, held]
    assert mem.peak_step == 3 and mem.peak_bytes == held + 32
    # Space 1 counted apart, at its own peak, with its buffer.
    (space,) = mem.other_spaces
    assert space.space == "unnamed space 1"
    assert space.peak_bytes == 64 and space.allocated_bytes == 64
    assert [b.bytes for b in space.at_peak] == [64]
    assert memory.from_dump(made_up(tmp_path), "tpu").other_spaces[0].space == "vmem"
    assert mem.backward_from == 4
    at = {b.instruction: b for b in mem.at_peak}
    assert set(at) == {"p.1", "b", "copy.1", "c", "t"}
    assert at["p.1"].category == "argument"
    assert at["c"].category == "output" and at["c"].reserved and at["c"].live == (0, 5)
    assert at["t"].category == "output"
    # b (forward, still live as the copy XLA added feeds the backward part)...
    assert at["copy.1"].category == "residual" and at["copy.1"].op_name == "jit(f)/jvp()/tanh"
    assert at["b"].category == "temporary"
    assert sum(b.bytes for b in mem.at_peak) == mem.peak_bytes


def test_the_backward_part_starts_where_most_instructions_agree():
    marks = {"f1": "forward", "early": "backward", "f2": "forward", "f3": "forward",
             "b1": "backward", "b2": "backward", "copy": None}  # fmt: skip
    phases = {name: (mark, None) for name, mark in marks.items()}
    # A backward op XLA hoists (a weight's transpose) does not start the backward part.
    sequence = ("f1", "early", "f2", "copy", "f3", "b1", "copy", "b2")
    assert buffer_kinds.backward_from(sequence, phases) == 5
    assert buffer_kinds.backward_from(("f1", "f2"), phases) is None
    assert buffer_kinds.backward_from(("copy", "b1", "b2"), phases) == 1


@pytest.mark.parametrize(
    "op_name, phase, recomputed",
    [
        ("jit(g)/jvp()/tanh", "forward", False),
        ("jit(g)/transpose(jvp())/dot_general", "backward", False),
        ("jit(g)/transpose(jvp(jvp()))/checkpoint/rematted_computation/tanh", "backward", True),
        (
            "jit(g)/transpose(jvp(rematted_computation))/checkpoint/eval_jaxpr/jvp(jvp())/tanh",
            "backward",
            True,
        ),  # fmt: skip
        ("jit(g)/jvp()/while/body/closed_call/tanh", "forward", False),
        ("jit(g)/jvp(jit(transpose))/mul", "forward", False),
        ("ws[0]", None, False),
        (None, None, False),
    ],
)
def test_the_name_stack_says_forward_or_backward(op_name, phase, recomputed):
    assert hlo_text.phase(op_name) == phase
    assert hlo_text.recomputes(op_name) == recomputed


def test_an_unknown_file_layout_is_refused(tmp_path):
    with pytest.raises(hlo_text.DumpUnreadable):
        buffers.parse_live_range("LiveRange v2\n")
    with pytest.raises(hlo_text.DumpUnreadable):
        buffers.parse_buffer_assignment("something else\n")
    with pytest.raises(hlo_text.DumpUnreadable):
        buffers.read_dump(str(tmp_path))
    assert hlo_text.strip_layout("(f32[2,3]{1,0:T(8,128)S(1)}, /*index=1*/s32[]{:S(2)})") == (
        "(f32[2,3], s32[])"
    )


def _tpu_device():
    try:
        from jax.experimental import topologies

        return topologies.get_topology_desc(platform="tpu", topology_name="v5e:2x2").devices[0]
    except Exception as exc:  # no libtpu
        pytest.skip(f"no deviceless TPU here: {exc}")


def test_a_deviceless_tpu_compile():
    device = _tpu_device()
    sharding = jax.sharding.SingleDeviceSharding(device)
    ws = [jax.ShapeDtypeStruct((WIDTH, WIDTH), jnp.float32, sharding=sharding)] * LAYERS
    x = jax.ShapeDtypeStruct((ROWS, WIDTH), jnp.float32, sharding=sharding)
    executable = compile_with_memory(gradient(layers).lower(ws, x))
    mem, why = memory_and_reason(executable)
    assert mem is not None, why
    stats = executable.memory_analysis()
    check_adds_up(mem, stats.peak_memory_in_bytes)
    assert mem.backward_from is not None
    # HBM holds the arguments and outputs throughout; TPU's own peak adds the
    # other spaces' (VMEM's) to HBM's.
    assert mem.peak_bytes >= stats.argument_size_in_bytes + stats.output_size_in_bytes
    others = sum(space.peak_bytes for space in mem.other_spaces)
    assert mem.peak_bytes <= stats.peak_memory_in_bytes <= mem.peak_bytes + others
    assert math.isclose(mem.by_category["argument"], stats.argument_size_in_bytes)
