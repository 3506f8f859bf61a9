"""Contract 14 in the compiled step: buffers at the peak name the residual
they hold, each residual says what XLA did with it, "did it apply" verdicts
(a typo, a name a checkpoint's policy does not reach, a site's policy under
another checkpoint's), XLA merging a recomputation (CSE), and XLA's own
rematerialization pass under a small memory limit (deviceless TPU, with the
tpu extra). Small models: each compile takes about a second on CPU."""

import inspect
import os
import sys

import jax
import pytest
from conftest import ROOT, example, jax_saved_residuals

import remat_tui
from remat_tui.core import stories
from remat_tui.core.setup import loading

sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import named_blocks  # noqa: E402

NAMES = os.path.join(ROOT, "tests", "models", "named_blocks.py")


@pytest.fixture(scope="module")
def mlp_compiled():
    target = loading.load_targets(example("mlp.py"))["loss"]
    return remat_tui.analyze(target, compiled=True)


def _share(a) -> float:
    memory = a.compiled.memory
    residual = memory["by_category"]["residual"]
    return memory["residual_bytes_named"] / residual


def test_every_residual_buffer_at_the_peak_names_its_residual(mlp_compiled):
    """examples/mlp.py: the two tanh outputs live at the peak (0 of 2 named
    before issue 34) name the tanh residuals of the layers they are, and the
    named residual that holds the same value says it is merged with it."""
    a = mlp_compiled
    memory = a.compiled.memory
    held = [b for b in memory["at_peak"] if b["category"] == "residual"]
    assert len(held) == 2 and _share(a) == 1.0
    for b in held:
        r = a.residuals[int(b["residual"][1:]) - 1]
        assert r.origin.primitive == "tanh" and r.aval == b["shape"]
        assert r.story.xla.what == stories.KEPT and r.story.xla.bytes_at_peak == b["bytes"]
    # checkpoint_name(tanh(...)): where JAX also saves the tanh itself (0.10),
    # the k-th named layer is the same value as the k-th unnamed tanh, merged;
    # else (0.11 and newer) kept
    tanhs = [r for r in a.residuals if r.kind == "output" and r.origin.primitive == "tanh"]
    named = [r for r in a.residuals if r.kind == "named"]
    for r in a.residuals:
        fate = r.story.xla
        if r.kind == "named" and tanhs:
            assert fate.what == stories.MERGED and not fate.disagrees
            assert a.residuals[int(fate.merged_with[1:]) - 1] is tanhs[named.index(r)]
        elif r.kind == "named":
            assert fate.what == stories.KEPT and fate.bytes_at_peak in (0, r.bytes)
        if r.kind == "argument":
            assert fate.what == stories.KEPT
    # the residual 1 - tanh² (sub on JAX 0.10, one_minus_square on 0.11 and
    # newer, which XLA's op_name names by its lowering's root, mul) is
    # computed inside the backward fusion that reads it
    fused = [r for r in a.residuals if r.origin.primitive in ("sub", "one_minus_square")]
    assert len(fused) == 3 and all(r.story.xla.what == stories.FUSED for r in fused)
    assert all(r.story.xla.disagrees for r in fused)


def test_a_names_model_names_what_it_keeps():
    """The named blocks, unrolled and scanned: at least 90% of the residual
    bytes at the peak name their residual; every named buffer's residual has
    its size and is made on a line XLA gives the buffer (a loop's stacked
    buffer carries the line that runs the scan, among the residual's frames).
    Unrolled, the loss's residual (2x of mean(x**2)) has no buffer: XLA
    keeps x, the last block's output, made on block's return line, and folds
    the 2x into the backward work; that buffer names it as its input."""
    block_return = _line_of(named_blocks.block, "return x + act")
    for name in ("unrolled", "scanned"):
        target = loading.load_targets(NAMES)[name]
        a = remat_tui.analyze(target, compiled=True)
        assert _share(a) >= 0.9, name
        memory = a.compiled.memory
        for b in memory["at_peak"]:
            if b["residual"] and b["category"] == "residual":
                r = a.residuals[int(b["residual"][1:]) - 1]
                at = (b["source"]["file"], b["source"]["line"]) if b["source"] else None
                if b.get("holds") == "input":
                    assert r.story.xla.what == stories.INPUT_KEPT and r.story.xla.disagrees
                    assert at == (NAMES, block_return) and r.origin.primitive == "mul"
                    assert r.story.xla.bytes_at_peak == b["bytes"]
                    continue
                assert r.aval == b["shape"]
                if at:
                    assert at in {(f.file, f.line) for f in r.story.made.frames}
            elif b["category"] == "residual":
                assert b["unnamed"]  # the rest say why
        inputs = [b for b in memory["at_peak"] if b.get("holds") == "input"]
        assert memory["residual_bytes_inputs"] == sum(b["bytes"] for b in inputs)
        assert len(inputs) == (1 if name == "unrolled" else 0)


def _line_of(fn, text: str) -> int:
    """The line of `fn`'s source that starts with `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if line.strip().startswith(text))


def _applied(a) -> dict:
    return {v.what: v for v in a.applied}


def test_a_typo_is_flagged_as_changing_nothing():
    """save_only_these_names('typo'): no checkpoint_name makes it, and its
    program is the one without it."""
    target = loading.load_targets(example("mlp.py"))["loss"]
    a = remat_tui.analyze(target, policy="save_only_these_names('typo')", compiled=True)
    verdict = _applied(a)["name 'typo' in the outer policy"]
    assert verdict.kind == "never_made" and "no checkpoint_name('typo')" in verdict.why
    assert "same program" in verdict.why
    report = remat_tui.core.display  # noqa: F841 (the report says it too)
    from remat_tui.report import render

    assert "name 'typo' in the outer policy" in render(a, "text")
    assert a.to_dict()["applied"][0]["kind"] == "never_made"


def test_a_name_in_a_scan_the_policy_does_not_reach_is_flagged():
    """The head's checkpoint saves 'act' by its policy, but 'act' is made in
    the scan before it, outside the head's body: flagged, and the residuals
    are those of the head's policy without it."""
    target = loading.load_targets(NAMES)["scan_then_head"]
    spec = "save_only_these_names('act')"
    a = remat_tui.analyze(target, sites={"head": spec})
    verdict = _applied(a)["name 'act' in site 1's policy (head)"]
    assert verdict.kind == "not_reached" and "inside the scan at named_blocks.py" in verdict.why
    # The oracle: the same source with the head's policy written by hand, with and without.
    args, kwargs = loading.resolve_arguments(target)
    cp = jax.checkpoint_policies
    with_act = named_blocks.make_scan_then_head(cp.save_only_these_names("act"))
    without = named_blocks.make_scan_then_head(cp.save_only_these_names())
    assert jax_saved_residuals(with_act, "as_written", args, kwargs) == jax_saved_residuals(
        without, "as_written", args, kwargs
    )


def test_a_sites_policy_under_another_checkpoint_is_flagged():
    """Under an outer policy, a site's override changes nothing: JAX judges the
    whole body by the outer policy; the residuals are the outer policy's."""
    target = loading.load_targets(NAMES)["scan_then_head"]
    over = remat_tui.analyze(target, policy="nothing_saveable", sites={1: "everything_saveable"})
    alone = remat_tui.analyze(target, policy="nothing_saveable")
    assert [r.text for r in over.residuals] == [r.text for r in alone.residuals]
    verdict = _applied(over)["site 1's policy (head)"]
    assert verdict.kind == "outer_decides" and "nothing_saveable" in verdict.why


def _layers(prevent_cse: bool):
    """Three tanh layers under nothing_saveable, with or without JAX's
    barrier against common subexpression elimination."""

    def layers(ws, x):
        for w in ws:
            x = jax.numpy.tanh(x @ w)
        return jax.numpy.mean(x**2)

    f32 = jax.numpy.float32
    args = ([jax.ShapeDtypeStruct((128, 128), f32)] * 3, jax.ShapeDtypeStruct((32, 128), f32))
    fn = jax.checkpoint(layers, policy=jax.checkpoint_policies.nothing_saveable,
                        prevent_cse=prevent_cse)  # fmt: skip
    return remat_tui.registry.Target(fn=fn, name="layers", args=args)


def test_xla_merging_a_recomputation_into_the_forward_pass_is_detected(mlp_compiled):
    """prevent_cse=False: the jaxpr recomputes every layer, XLA keeps the
    forward values instead (common subexpression elimination); the buffers
    say so, and so does a verdict. The same code with JAX's barrier (the
    default) keeps the recomputed values, and nothing is said merged."""
    a = remat_tui.analyze(_layers(prevent_cse=False), compiled=True)
    merged = a.compiled.memory["merged_recompute"]
    held = [b for b in a.compiled.memory["at_peak"] if b["category"] == "residual"]
    assert held and all("merged that recomputation" in b["unnamed"] for b in held)
    line = held[0]["source"]["line"]
    assert {m["value"] for m in merged} >= {f"tanh at test_story_xla.py:{line}"}
    assert _applied(a)["the recomputation the policy asks for"].kind == "cse_merged"
    barrier = remat_tui.analyze(_layers(prevent_cse=True), compiled=True)
    assert barrier.compiled.memory["by_category"]["recomputed"] > 0
    assert barrier.compiled.memory["merged_recompute"] == [] and barrier.applied == []
    # as written nothing is recomputed, so nothing is merged
    assert mlp_compiled.compiled.memory["merged_recompute"] == []


@pytest.mark.skipif(
    not __import__("importlib").util.find_spec("libtpu"),
    reason="needs the tpu extra (libtpu) to compile for a deviceless TPU",
)
def test_xlas_remat_pass_under_a_small_memory_limit_is_detected_with_its_flag():
    """8 tanh layers of 64 MiB of activations on a v5e: with 100 MiB of HBM
    XLA's rematerialization pass clones forward work into the backward part;
    the check says what, what it cost, and the flag that set the limit."""
    from remat_tui.core.setup.config import Config
    from remat_tui.core.xla.fates.remat_pass import TPU_LIMIT_FLAG, remat_pass

    def wide(x, ws):
        for w in ws:
            x = jax.numpy.tanh(x @ w)
        return x.sum()

    f32 = jax.numpy.float32
    args = (jax.ShapeDtypeStruct((16384, 256), f32), [jax.ShapeDtypeStruct((256, 256), f32)] * 8)
    target = remat_tui.registry.Target(fn=wide, name="wide", args=args)
    found = remat_pass(target, Config.make(device="tpu:v5e:2x2"), 100 * 2**20)
    assert found.acted and found.clones and found.fits
    assert found.flag == f"{TPU_LIMIT_FLAG}=100"
    assert found.with_limit["flops"] > found.without_limit["flops"]
    assert found.with_limit["peak_bytes"] < found.without_limit["peak_bytes"]
    said = found.to_dict()
    assert TPU_LIMIT_FLAG in said["controls"]
    assert "jax_compiler_enable_remat_pass" in said["controls"]


def _masked_attention():
    """One causal attention head: the jaxpr saves the softmax's exp and its
    output; a TPU compile keeps the masked scores (jnp.where's select_n) and
    the row maxima and sums instead, and computes the softmax again in the
    backward part."""
    jnp = jax.numpy
    seq, width = 128, 64

    def loss(x, w):
        scores = (x @ w) @ (x @ w.T).T
        causal = jnp.tril(jnp.ones((seq, seq), bool))
        weights = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1)
        return jnp.sum((weights @ x) ** 2)

    f32 = jnp.float32
    args = (jax.ShapeDtypeStruct((seq, width), f32), jax.ShapeDtypeStruct((width, width), f32))
    return remat_tui.registry.Target(fn=loss, name="attention", args=args)


@pytest.mark.skipif(
    not __import__("importlib").util.find_spec("libtpu"),
    reason="needs the tpu extra (libtpu) to compile for a deviceless TPU",
)
def test_a_buffer_xla_keeps_instead_of_a_residual_names_it_as_its_input():
    """Masked attention on a v5e: the buffer of the masked scores names the
    softmax residual it is the input of (marked `holds: input`), and the
    softmax residuals say XLA keeps what they are computed from and computes
    them again; XLA's own program shows that recomputation: forward (jvp)
    exp and div on the softmax's line inside fusions of the backward part."""
    from remat_tui.core.jaxcompat import hlo_text
    from remat_tui.core.setup.config import Config
    from remat_tui.core.xla.compile import costs as compiled

    target = _masked_attention()
    a = remat_tui.analyze(target, compiled=True, device="tpu:v5e:2x2")
    memory = a.compiled.memory
    buffers = [b for space in [memory, *memory["other_spaces"]] for b in space["at_peak"]]
    held = [b for b in buffers if b["category"] == "residual"]
    line = held[0]["source"]["line"] if held and held[0]["source"] else None
    scores = [b for b in held if b["shape"] == "f32[128,128]"]
    assert scores and all(b.get("holds") == "input" for b in scores)
    softmax = {a.residuals[int(b["residual"][1:]) - 1].origin.primitive for b in scores}
    assert softmax <= {"exp", "div"}
    for r in a.residuals:
        if r.origin is not None and r.origin.primitive in ("exp", "div"):
            fate = r.story.xla
            assert fate.what == stories.INPUT_KEPT and "computes it again" in fate.words
            assert "select_n" in fate.words and fate.disagrees
            line = r.origin.source.line
    assert all(b["residual"] or b["unnamed"] for b in held)  # or says why not
    # XLA's program, read apart: forward exp or div on that line inside the
    # backward part's fusions (each fusion's op_name is its root's)
    step = compiled.compile_step(target, Config.make(device="tpu:v5e:2x2"))
    module = hlo_text.parse_hlo(step.executable.as_text())
    callers = {c: i for i in module.instructions.values() for c in i.called}
    again = [
        i
        for i in module.instructions.values()
        if hlo_text.primitive(i.op_name) in ("exp", "div")
        and hlo_text.phase(i.op_name) == "forward"
        and any(f.line == line for f in i.stack)
        and _in_backward(callers, i)
    ]
    assert again


def _in_backward(callers: dict, instruction) -> bool:
    """Whether an instruction sits inside a fusion the backward part runs."""
    from remat_tui.core.jaxcompat import hlo_text

    at = callers.get(instruction.computation)
    while at is not None:
        if hlo_text.phase(at.op_name) == "backward":
            return True
        at = callers.get(at.computation)
    return False


def test_one_saved_layer_of_three_alike_is_told_by_its_place():
    """save_only_these_names('layer1') on the MLP: XLA keeps all three layers'
    alike tanh values (it merges the recomputation of the others), and the
    named layer1 is the second of the three alike tanh equations: its buffer
    is the second value, the others say why they name no residual."""
    target = loading.load_targets(example("mlp.py"))["loss"]
    a = remat_tui.analyze(target, policy="save_only_these_names('layer1')", compiled=True)
    (saved,) = [i for i, r in enumerate(a.residuals) if r.kind == "named"]
    made = a.residuals[saved].story.made
    assert (made.primitive, made.ordinal, made.alike) == ("tanh", 1, 3)
    named = [b for b in a.compiled.memory["at_peak"] if b["residual"] == f"R{saved + 1}"]
    assert named and a.residuals[saved].story.xla.what == stories.KEPT
    others = [b for b in a.compiled.memory["at_peak"] if b["category"] == "residual"]
    assert all(b["residual"] or b["unnamed"] for b in others)


def test_a_memory_limit_off_a_tpu_says_why_it_cannot_be(capsys):
    """XLA's CPU compiler has no rematerialization pass: --memory-limit on
    cpu:0 is bad input, said with the cause and what to give instead."""
    from remat_tui.cli import main

    assert main(["memory", example("mlp.py"), "--memory-limit", "1MiB"]) == 2
    said = capsys.readouterr().err
    assert "no rematerialization pass" in said and "--device tpu:v5e:2x2" in said
    assert "Traceback" not in said
