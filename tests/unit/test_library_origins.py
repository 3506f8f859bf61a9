"""Origins of values computed inside library code that a checkpoint wraps
directly (issue 30, item 14): a Linen BatchNorm under nn.remat, an NNX
Linear in bf16 under nnx.remat, a MaxText-style decoder whose library
attention is under nn.remat in an nn.scan, a shard_map'd function with a
debug print under jax.checkpoint (tests/models/library_layers.py). JAX's
frames for them hold no line of the model, and where JAX copies them out of
their body (a checkpoint's forward part evaluated in place, a removed
checkpoint inlined, a scan's loop invariants hoisted) not even the line
that entered it: the origin is the model's line that ran the checkpoint.

The oracles: JAX's own residual list, the frames JAX recorded on the model's
primal program (every origin is one of its lines) and the model's source,
read here, for the line that runs each checkpoint.
"""

import functools
import os

import pytest

pytest.importorskip("flax")

import jax  # noqa: E402
from conftest import jax_saved_residuals  # noqa: E402

import remat_tui  # noqa: E402
from remat_tui.core import jaxcompat as jc  # noqa: E402
from remat_tui.core.setup import loading  # noqa: E402

MODEL = os.path.join(os.path.dirname(os.path.dirname(__file__)), "models", "library_layers.py")
# Each model's checkpoint, by the text of the line that runs it.
RUNS = {
    "batchnorm": 'h = checkpoint_name(norm(use_running_average=False)(h), "normed")',
    "nnx_bf16": "h = nnx.remat(self.first",
    "decoder": "x = x + checkpoint_name(attention(num_heads=cfg.heads",
    "shard_mapped": "return jnp.sum(jax.checkpoint(f, policy=getattr(CP, policy))",
}


def line_of(text: str) -> int:
    with open(MODEL) as fh:
        return next(n for n, line in enumerate(fh, 1) if text in line)


@functools.cache
def load(name):
    target = loading.load_targets(MODEL)[name]
    return target, loading.resolve_arguments(target)


@functools.cache
def lines_jax_recorded(name) -> frozenset[int]:
    """The model's lines among the frames JAX recorded on its primal program."""
    target, (args, kwargs) = load(name)
    program = jc.open_jaxpr(jax.make_jaxpr(target.fn)(*args, **kwargs))
    return frozenset(
        frame.line_num
        for eqn, _ in jc.nested_eqns(program)
        for frame in eqn.source_info.traceback.frames
        if frame.file_name == MODEL
    )


def check_origins(name, analysis):
    made = [r for r in analysis.residuals if r.kind != "argument"]
    assert made
    for r in made:
        where = r.origin.source
        assert where is not None and where.file == MODEL, (r.text, where)
        assert where.line in lines_jax_recorded(name), (r.text, where)
    return made


@pytest.mark.parametrize("site", [None, "as_written"])
@pytest.mark.parametrize("name", list(RUNS))
def test_every_origin_is_a_line_of_the_model(name, site):
    target, (args, kwargs) = load(name)
    got = remat_tui.analyze(target, sites={1: site} if site else None)
    if site is None:
        assert [r.text for r in got.residuals] == jax_saved_residuals(
            target.fn, "as_written", args, kwargs
        )
    made = check_origins(name, got)
    assert got.sites[0].called_at.line == line_of(RUNS[name])
    if name != "shard_mapped":  # a checkpoint of library code: no line of the model inside
        inside = [r for r in made if r.origin.site == 1]
        assert inside and {r.origin.source.line for r in inside} == {line_of(RUNS[name])}


def test_a_name_given_outside_a_checkpointed_batchnorm():
    target, (args, kwargs) = load("batchnorm")
    spec = "save_only_these_names('normed')"
    got = remat_tui.analyze(target, policy=spec)
    assert [r.text for r in got.residuals] == jax_saved_residuals(target.fn, spec, args, kwargs)
    (named,) = [r for r in got.residuals if r.origin.name == "normed"]
    assert named.origin.source.file == MODEL
    assert named.origin.source.line == line_of(RUNS["batchnorm"]) and named.origin.site == 1
    check_origins("batchnorm", got)


def test_a_policy_changed_at_the_site_keeps_the_lines():
    """The oracle for the override: the factory given the policy's name."""
    target, (args, kwargs) = load("decoder")
    got = remat_tui.analyze(target, sites={1: "dots_saveable"})
    by_hand = target.fn.__globals__["make_decoder"]("dots_saveable")
    assert [r.text for r in got.residuals] == jax_saved_residuals(
        by_hand, "as_written", args, kwargs
    )
    check_origins("decoder", got)


def test_a_debug_prints_scalar_saved_by_shard_map_has_the_models_line():
    """shard_map carries a scalar residual out of its body as a (1,)-shaped
    broadcast of its own, with no frame of the model's: the value is the
    scalar's, made at the model's line."""
    target, _ = load("shard_mapped")
    got = remat_tui.analyze(target)
    promoted = [r for r in got.residuals if r.shape == (4,)]  # one (1,) per device
    assert promoted and all(r.origin.primitive != "broadcast_in_dim" for r in promoted)
    check_origins("shard_mapped", got)
