"""Contract 14 on XLA's CPU schedule of a list of checkpointed blocks (issue
41, item 6): tests/models/linen_remat_list.py, a Flax Linen decoder whose
blocks are a Python list of `nn.remat(Block)`, with a log_softmax
cross-entropy, shaped as google-deepmind/nanodo writes it.

XLA on CPU runs the weights' transposes before any forward work, so
instructions whose op_name says `transpose(...)` run from the first steps
on; the XLA of JAX 0.10 also runs each block's recomputation beside the
forward work it repeats (it may: it reads only the block's input), the XLA
of JAX 0.12 in the backward part. The oracle is the same step
compiled by hand (`jax.jit(jax.value_and_grad(loss))`) and its optimized
HLO: each instruction's op_name, stack and operands, its schedule and XLA's
buffer assignment."""

import inspect
import os
import sys

import jax
import pytest
from conftest import ROOT

import remat_tui
from remat_tui.core import stories
from remat_tui.core.jaxcompat import buffers, hlo_text
from remat_tui.core.units import human_bytes
from remat_tui.core.xla.buffers import memory

sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import linen_remat_list as model  # noqa: E402

MODEL = os.path.join(ROOT, "tests", "models", "linen_remat_list.py")


def _line_of(fn, text: str) -> int:
    """The line of `fn`'s source that starts with `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if line.strip().startswith(text))


BLOCK_RETURN = _line_of(model.Block.__call__, "return x + nn.Dense")
LOG_SOFTMAX = _line_of(model.cross_entropy, "logp = jax.nn.log_softmax")


@pytest.fixture(scope="module")
def analysed():
    return remat_tui.analyze(model.make_loss(None), args=model.example_args(), compiled=True)


@pytest.fixture(scope="module")
def by_hand(tmp_path_factory):
    """The step compiled by hand, with XLA's record of it: (the optimized
    module, its schedule, the Memory read from the record)."""
    directory = str(tmp_path_factory.mktemp("xla"))
    lowered = jax.jit(jax.value_and_grad(model.make_loss(None))).lower(*model.example_args())
    lowered.compile(compiler_options=buffers.dump_options(directory))
    dump = buffers.read_dump(directory)
    return dump.module, dump.live.sequence, memory.from_dump(dump)


def _line(instruction: hlo_text.Instruction) -> int | None:
    return next((f.line for f in instruction.stack if f.file == MODEL), None)


def _block_outputs(module: hlo_text.Module) -> dict[int, str]:
    """Block k -> the instruction computing its output in the forward part:
    a forward `add` on the block's return line, under CheckpointBlock_k."""
    out = {}
    for name, i in module.instructions.items():
        if i.computation != module.entry or hlo_text.phase(i.op_name) != "forward":
            continue
        if hlo_text.primitive(i.op_name) == "add" and _line(i) == BLOCK_RETURN:
            k = int(i.op_name.split("CheckpointBlock_")[1].split("/")[0])
            assert k not in out
            out[k] = name
    return out


def _readers(module: hlo_text.Module, name: str) -> list[hlo_text.Instruction]:
    return [i for i in module.instructions.values() if name in i.operands]


def test_each_blocks_output_is_its_own_buffer(analysed, by_hand):
    """The outputs of blocks 0 .. BLOCKS-2 (each the next block's input,
    saved for its recomputation) are kept in the forward buffer that
    block's own add makes in the hand compile, a different one each; all
    were 'recomputed' in one buffer of the backward part before. The last
    block's output is no residual (only the final LayerNorm reads it): the
    XLA of JAX 0.12 fuses its add into the LayerNorm's reductions, with no
    buffer of its own."""
    module, _, _ = by_hand
    outputs = _block_outputs(module)
    assert set(range(model.BLOCKS - 1)) <= set(outputs) <= set(range(model.BLOCKS))
    saved = [
        r for r in analysed.residuals
        if r.kind == "output" and r.origin.primitive == "add"
        and r.origin.source.line == BLOCK_RETURN
    ]  # fmt: skip
    assert len(saved) == model.BLOCKS - 1
    for k, r in enumerate(saved):
        assert r.story.xla.what == stories.KEPT, r.story.xla.words
        assert r.story.xla.buffer == outputs[k]
        # the hand compile reads it in the backward part (the next block's recomputation)
        assert any(hlo_text.phase(i.op_name) == "backward" for i in _readers(module, outputs[k]))


def test_the_loss_exp_kept_for_the_backward_part_is_not_removed(analysed, by_hand):
    """log_softmax's exp: the hand compile computes it in the forward part
    and its backward work reads it; its story says kept, in that buffer
    ('removed' before: the jaxpr's exp, inside jax.nn's jitted body, had no
    frame of the user's to match XLA's)."""
    module, _, _ = by_hand
    exps = [
        name for name, i in module.instructions.items()
        if i.computation == module.entry and hlo_text.phase(i.op_name) == "forward"
        and hlo_text.primitive(i.op_name) == "exp" and _line(i) == LOG_SOFTMAX
    ]  # fmt: skip
    assert len(exps) == 1
    assert any(hlo_text.phase(i.op_name) == "backward" for i in _readers(module, exps[0]))
    (r,) = [r for r in analysed.residuals if r.origin.primitive == "exp"]
    assert r.origin.source.line == LOG_SOFTMAX
    assert r.story.xla.what == stories.KEPT and r.story.xla.buffer == exps[0]
    assert r.story.made.frames[0].line == LOG_SOFTMAX


def test_the_backward_part_starts_after_the_forward_blocks(by_hand):
    """The backward part starts after the last forward work of the blocks
    and no later than the first transposition of a block that reads a
    block's output (the residual it was kept for), though instructions
    under transpose(...) (the blocks' recomputations, the weights'
    transposes) run from the first steps on; so each block output live at
    the peak is a residual there (before: backward from step 37 of 335, and
    residuals 0.6% of the peak)."""
    module, sequence, mem = by_hand
    step = {name: k for k, name in enumerate(sequence)}
    ops = {name: module.instructions[name].op_name or "" for name in sequence}
    early = [n for n in sequence if "transpose(" in ops[n]]
    assert step[early[0]] < len(sequence) // 4  # the schedule this test is about
    last_forward = max(
        step[n] for n in sequence
        if hlo_text.phase(ops[n]) == "forward" and "CheckpointBlock_" in ops[n]
    )  # fmt: skip
    outputs = set(_block_outputs(module).values())
    first_transpose = min(
        step[n] for n in sequence
        if hlo_text.phase(ops[n]) == "backward" and not hlo_text.recomputes(ops[n])
        and outputs & set(module.instructions[n].operands)
    )  # fmt: skip
    assert last_forward < mem.backward_from <= first_transpose
    held = [b for b in mem.at_peak if b.instruction in outputs]
    assert held and all(b.category == "residual" for b in held)
    assert sum(b.bytes for b in mem.at_peak) == mem.peak_bytes
    assert mem.by_category["residual"] >= sum(b.bytes for b in held)


def test_a_residual_at_the_peak_is_read_by_the_backward_part(by_hand):
    """Every `residual` buffer at the peak is read after the backward part
    starts by backward work (the hand compile's op_names, inside fusions
    too), and every forward temporary live across the start only by forward
    work: the log_softmax's shifted logits, live across the start for the
    loss's value that XLA computes after the first backward work, are a
    temporary (a residual before, 32 KiB of 87.5 at the peak)."""
    module, sequence, mem = by_hand
    step = {name: k for k, name in enumerate(sequence)}

    def backward(i: hlo_text.Instruction) -> bool:
        inside = [j for j in module.instructions.values() if j.computation in i.called]
        return any(hlo_text.phase(j.op_name) == "backward" for j in [i, *inside])

    for b in mem.at_peak:
        late = [
            r for r in _readers(module, b.instruction) if step.get(r.name, -1) >= mem.backward_from
        ]
        if b.category == "residual":
            assert any(backward(r) for r in late), b.instruction
        elif (
            b.category == "temporary"
            and hlo_text.phase(b.op_name) == "forward"
            and b.live[0] < mem.backward_from <= b.live[1]
        ):
            assert late and not any(backward(r) for r in late), b.instruction
    logits = f"f32[{model.BATCH},{model.SEQ},{model.VOCAB}]"
    shifted = [
        b for b in mem.at_peak
        if b.shape == logits and hlo_text.phase(b.op_name) == "forward"
        and hlo_text.primitive(b.op_name) != "exp" and b.source and b.source.line == LOG_SOFTMAX
    ]  # fmt: skip
    assert len(shifted) == 1 and shifted[0].category == "temporary"


def test_the_residual_bytes_at_the_peak_name_their_residuals(analysed):
    """The buffers of the block outputs, the embedding's gather and the
    loss's exp at the peak name their residual (0% of the residual bytes at
    the peak did before)."""
    mem = analysed.compiled.memory
    named = {b["residual"]: b for b in mem["at_peak"] if b["category"] == "residual"}
    held = {analysed.residuals[int(r[1:]) - 1].origin.primitive for r in named if r}
    assert {"add", "gather", "exp"} <= held
    assert sum(b["bytes"] for b in mem["at_peak"]) == mem["peak_bytes"]
    assert mem["residual_bytes_named"] >= 0.9 * mem["by_category"]["residual"]


def test_recomputation_run_in_the_forward_part_is_said(analysed, by_hand):
    """Where XLA on CPU computes the blocks' recomputation beside their
    forward work (JAX 0.10's XLA), the recomputed buffers at the hand
    compile's peak start before the backward part, and the memory view says
    how many bytes. Where the hand compile runs no recomputation before the
    backward part (JAX 0.12's XLA), the view says none ran there."""
    module, sequence, mem = by_hand
    early = [b for b in mem.at_peak if b.category == "recomputed" and b.live[0] < mem.backward_from]
    said = analysed.compiled.memory["explanation"] or ""
    ran_early = [
        n
        for n in sequence[: mem.backward_from]
        if hlo_text.recomputes(module.instructions[n].op_name)
    ]
    if not ran_early:
        assert not early and "XLA computed before the backward part" not in said
        return
    assert early and all(hlo_text.recomputes(b.op_name) for b in early)
    assert f"{human_bytes(sum(b.bytes for b in early))} of the " in said
    assert "XLA computed before the backward part" in said
