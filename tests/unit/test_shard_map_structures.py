"""Structures of a scan inside a `shard_map` body (issue 42, Wanted 1;
Contracts 15 and 17), on tests/models/shard_map_scan.py: an FSDP kernel
whose body, on each device's local arrays, scans 4 layers under
`jax.checkpoint`, over a 4-device mesh. The scan is rebuilt within the body;
nested(G) and split rows are the same structure written here by hand inside
the body, compiled by JAX with `jax.value_and_grad` (one device's peak, to
the byte), with JAX's own residuals; the printed code, pasted where the body
calls the scan, compiles to the reported peak; suggest completes on it;
verify finds the rebuilt step's gradients equal to the code as written's;
and the residuals made in the body carry the lines of the body's equations,
as JAX records them."""

import json
import os
import re
import subprocess
import sys

import jax
import pytest
from conftest import ROOT
from test_structures import WHERE, jax_residuals, value_and_grad_memory

from remat_tui.core.setup.config import Config
from remat_tui.core.trace.analysis import analyze
from remat_tui.core.xla.compile.costs import compile_answer
from remat_tui.registry import Target

sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import shard_map_scan as model  # noqa: E402

CP = jax.checkpoint_policies
CALL = re.compile(r"^#\s+carry, ys = (.+)$", re.M)
STEP = re.compile(r"^# with (step_\w+) = (.+?)(  \(as written\))?$", re.M)
LITERAL = "f32[] from a literal"


def the_target() -> Target:
    return Target(fn=model.make_loss(), name="loss", args=model.example_args)


def by_hand_nested(groups, devices=None):
    """The body with its scan nested by hand: the local stacked weights
    reshaped (plain: inside the body they are one device's), a scan over
    `groups` checkpointed groups of scans over their layers."""
    step = jax.checkpoint(model.layer, policy=model.WRITTEN)
    per_group = model.LAYERS // groups

    def body(params, x):
        grouped = jax.tree.map(lambda w: w.reshape(groups, per_group, *w.shape[1:]), params)

        def group(x, group_params):
            return jax.lax.scan(step, x, group_params)

        x, means = jax.lax.scan(jax.checkpoint(group), x, grouped)
        return model.loss_of(x, means.reshape(model.LAYERS))

    return model.make_loss(body=body, devices=devices)


def by_hand_split(first, policy_first, policy_rest, devices=None):
    """The body's scan as two scans by hand: the first `first` layers under
    `policy_first`, the rest under `policy_rest`."""

    def body(params, x):
        head = jax.tree.map(lambda w: w[:first], params)
        tail = jax.tree.map(lambda w: w[first:], params)
        x, means_head = jax.lax.scan(jax.checkpoint(model.layer, policy=policy_first), x, head)
        x, means_tail = jax.lax.scan(jax.checkpoint(model.layer, policy=policy_rest), x, tail)
        return model.loss_of(x, jax.numpy.concatenate([means_head, means_tail]))

    return model.make_loss(body=body, devices=devices)


BY_HAND = {
    "nested(2)": lambda: by_hand_nested(2),
    "split(2, everything_saveable, as_written)": lambda: by_hand_split(
        2, CP.everything_saveable, model.WRITTEN
    ),
    "split(1, as_written, nothing_saveable)": lambda: by_hand_split(
        1, model.WRITTEN, CP.nothing_saveable
    ),
}


def pasted(python: str):
    """The loss with the body's scan replaced as `python` (the tool's
    snippet) says: the helper executed, the steps it names built, the call
    it prints made where the body calls jax.lax.scan(step, init, xs)."""
    helper: dict = {}
    exec(python, helper)  # noqa: S102 (the code the tool prints, run as a user would)
    steps = {
        name: eval(expr, {"jax": jax, "layer": model.layer})  # noqa: S307
        for name, expr, _ in STEP.findall(python)
    }
    (call,) = CALL.findall(python)
    step = jax.checkpoint(model.layer, policy=model.WRITTEN)

    def body(params, x):
        scope = {**helper, **steps, "step": step, "init": x, "xs": params}
        x, means = eval(call, scope)  # noqa: S307
        return model.loss_of(x, means)

    return model.make_loss(body=body)


def without_literal(lines: list[str]) -> list[str]:
    """The residual lines but JAX's "from a literal": the loss's division by
    the batch size, outside the body. A program remat-tui rewrites (any site
    policy or structure) re-binds that literal, and JAX then keeps it as a
    constant of the backward pass, not a residual (the same with no
    shard_map, and with a site override alone): 4 bytes, not a layer's."""
    return [line for line in lines if line != LITERAL]


@pytest.mark.parametrize("structure", list(BY_HAND))
def test_a_structure_is_the_same_structure_written_by_hand_in_the_body(structure):
    target, config = the_target(), Config.make(structure=structure)
    args = target.args()
    by_hand = BY_HAND[structure]()
    tool = analyze(target, config=config)
    assert [WHERE.sub("", r.text) for r in tool.residuals] == without_literal(
        jax_residuals(by_hand, args)
    )
    compiled = compile_answer(target, config).result
    assert compiled.devices == 4
    memory = value_and_grad_memory(by_hand, args)
    assert (compiled.peak_bytes, compiled.temp_bytes) == (
        memory["peak_bytes"],
        memory["temp_bytes"],
    )
    # The printed code says where it goes, and pasted there compiles to it.
    assert "inside a jax.shard_map body" in tool.python
    fn = pasted(tool.python)
    assert value_and_grad_memory(fn, args)["peak_bytes"] == compiled.peak_bytes
    assert jax_residuals(fn, args) == jax_residuals(by_hand, args)


def test_the_scan_in_the_body_is_offered_structures():
    from remat_tui.core.search.configs.structure_grid import structure_candidates, structure_notes

    target, base = the_target(), Config.make()
    assert structure_notes(target, base) == []
    offered = {c.structure.canonical for c in structure_candidates(target, base)}
    assert {"nested(2)", "split(2, everything_saveable, as_written)"} <= offered, offered


def test_residuals_made_in_the_body_carry_the_lines_of_its_equations():
    """JAX words a residual made in the body `output of shard_map from` the
    shard_map's call; its origin is the body's equation that made it, at a
    line JAX records for one of the body's equations, never the call's; a
    named one at its checkpoint_name's line; so is its story's first frame."""
    target = Target(
        fn=model.make_loss(CP.save_only_these_names("gathered", "hidden")),
        name="loss",
        args=model.example_args,
    )
    args = target.args()
    body_lines = set()  # the lines JAX records for the body's equations
    (mapped_eqn,) = jax.make_jaxpr(target.fn)(*args).jaxpr.eqns[:1]
    assert mapped_eqn.primitive.name == "shard_map"
    for eqn in _body_eqns(mapped_eqn.params["jaxpr"]):
        frame = jax._src.source_info_util.user_frame(eqn.source_info.traceback)
        if frame is not None and frame.file_name == model.__file__:
            body_lines.add(frame.start_line)
    with open(model.__file__) as fh:
        text = fh.read().splitlines()
    named = {
        n: 1 + next(i for i, t in enumerate(text) if f'"{n}")' in t and "checkpoint_name(" in t)
        for n in ("gathered", "hidden")
    }
    assert set(named.values()) <= body_lines
    tool = analyze(target, config=Config.make())
    mapped = [r for r in tool.residuals if "output of shard_map" in r.text]
    assert len(mapped) == 4, [r.text for r in mapped]
    made = {}
    for r in mapped:
        origin = r.origin
        assert origin.source is not None and origin.source.file == model.__file__, r.text
        assert origin.source.line != r.source.line, r.text  # not the shard_map's call
        assert origin.source.line in body_lines, (r.text, origin, body_lines)
        made[origin.name or origin.primitive] = origin.source.line
        frame = r.story.made.frames[0]
        assert (frame.file, frame.line) == (origin.source.file, origin.source.line)
    assert (made["gathered"], made["hidden"]) == (named["gathered"], named["hidden"])


def _body_eqns(jaxpr):
    """Every equation of `jaxpr` and of the jaxprs its equations hold (a
    closed jaxpr's, a shard_map's, a scan's; under JAX_REMAT3 a checkpoint's
    is its `_prim` object's)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for inner in value if isinstance(value, tuple) else (value,):
                while not hasattr(inner, "eqns") and hasattr(inner, "jaxpr"):
                    inner = inner.jaxpr
                if hasattr(inner, "eqns"):
                    yield from _body_eqns(inner)


def test_suggest_on_a_budget_completes_over_the_structures():
    """suggest --compiled weighs the body's structures beside the policies
    (no note says a scan gets none) and answers within the budget, its
    figure the answer compiled by hand. The budget, 9000 B, is one only the
    layer's checkpoint under nothing_saveable fits (8604 B on JAX 0.10 and
    0.12; the next, a split, 9628 B), so the answer does not hang on the
    estimated times, which are calibrated on this machine."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run(
        [sys.executable, "-m", "remat_tui", "suggest", model.__file__, "--compiled",
         "--budget", "9000", "--format", "json"],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["fits"] and report["structure_notes"] == []
    best = report["best"]
    assert (best["policy"], best["sites"], best.get("structure")) == (
        "as_written",
        {"layer": "nothing_saveable"},
        None,
    )
    by_hand = model.make_loss(CP.nothing_saveable)
    peak = value_and_grad_memory(by_hand, model.example_args())["peak_bytes"]
    assert best["compiled"]["peak_bytes"] == peak <= 9000


@pytest.mark.parametrize("structure", ["nested(2)", "split(1, as_written, nothing_saveable)"])
def test_the_rebuilt_body_gives_the_gradients_of_the_code_as_written(structure):
    """Run on the 4 CPU devices, the step with the body's scan rebuilt gives
    the loss and gradients the code as written gives (remat-tui verify)."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run(
        [sys.executable, "-m", "remat_tui", "verify", model.__file__, "--structure", structure,
         "--format", "json"],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["gradients"]["verdict"] == "equal"


def test_on_a_deviceless_tpu_a_structure_compiles_to_the_hand_written_one():
    """Compiled for a deviceless `tpu:v5e:2x2` (4 chips, the mesh over them),
    the rebuilt body's step has XLA's own figures of the same structure
    written by hand in the body: temporaries, arguments and outputs, per chip."""
    from remat_tui.core.setup import devices as devices_lib
    from remat_tui.errors import RematError

    try:
        tpu = devices_lib.resolve_device("tpu:v5e:2x2")
    except RematError as exc:
        pytest.skip(f"no deviceless TPU here ({exc.message})")
    chips = devices_lib.device_set(tpu)
    target = Target(
        fn=model.make_loss(devices=chips),
        name="loss",
        args=lambda devices=None: model.example_args(devices),
    )
    args = model.example_args(chips)
    for structure, by_hand in [
        ("nested(2)", by_hand_nested(2, chips)),
        ("split(1, as_written, nothing_saveable)",
         by_hand_split(1, model.WRITTEN, CP.nothing_saveable, chips)),
    ]:  # fmt: skip
        compiled = compile_answer(target, Config.make(structure=structure), device=tpu).result
        assert compiled.devices == 4
        m = jax.jit(jax.value_and_grad(by_hand)).lower(*args).compile().memory_analysis()
        assert (
            compiled.temp_bytes, compiled.argument_bytes, compiled.output_bytes,
            compiled.alias_bytes,
        ) == (
            m.temp_size_in_bytes, m.argument_size_in_bytes, m.output_size_in_bytes,
            m.alias_size_in_bytes,
        ), structure  # fmt: skip


def test_a_checkpoint_without_cse_prevention_is_rebuilt_with_it_in_the_body():
    """The body's layer under `jax.checkpoint(..., prevent_cse=False)` (as a
    checkpoint inside a scan usually is): nested(2)'s groups and its printed
    call keep the keyword, and the row is the hand-written one with it."""
    step = jax.checkpoint(model.layer, policy=model.WRITTEN, prevent_cse=False)

    def body(params, x):
        x, means = jax.lax.scan(step, x, params)
        return model.loss_of(x, means)

    def by_hand(params, x):
        grouped = jax.tree.map(lambda w: w.reshape(2, 2, *w.shape[1:]), params)

        def group(x, group_params):
            return jax.lax.scan(step, x, group_params)

        x, means = jax.lax.scan(jax.checkpoint(group, prevent_cse=False), x, grouped)
        return model.loss_of(x, means.reshape(model.LAYERS))

    target = Target(fn=model.make_loss(body=body), name="loss", args=model.example_args)
    config, args = Config.make(structure="nested(2)"), target.args()
    hand = model.make_loss(body=by_hand)
    tool = analyze(target, config=config)
    assert "#     carry, ys = nested_scan(step, init, xs, groups=2, prevent_cse=False)" in (
        tool.python.splitlines()
    )
    assert [WHERE.sub("", r.text) for r in tool.residuals] == without_literal(
        jax_residuals(hand, args)
    )
    peak = compile_answer(target, config).result.peak_bytes
    assert peak == value_and_grad_memory(hand, args)["peak_bytes"]
