"""Origins (Contract 5) and the stories' "made by" (Contract 14) through
calls (issue 41, items 10 and 15): the output of a checkpointed call that
the next call saves as its input (`output of remat2`, under
everything_saveable), a library's jitted body that JAX traces once and
shares between a checkpoint and the loss (jnp.take), and values made
inside a library's jitted body (jax.nn's log_softmax, an embedding's
gather), which keeps no frame of the user's.

The oracles: the model's own lines, read here from its source, JAX's
residual list and the values jax.vjp keeps for the backward pass."""

import inspect
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT, jax_saved_residuals
from jax.ad_checkpoint import checkpoint_name

import remat_tui

sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import equinox_loop  # noqa: E402
import linen_remat_list  # noqa: E402

CP = jax.checkpoint_policies
HERE = os.path.abspath(__file__)


def _line_of(fn, text: str) -> int:
    """The line of `fn`'s source that starts with `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if line.strip().startswith(text))


# ---- a jax.checkpoint'ed function called at top level, in a loop -----------------


def block(w, x):
    return jnp.tanh(x @ w)


def make_looped(policy):
    def loss(ws, x):
        for w in ws:
            x = jax.checkpoint(block, policy=policy)(w, x)
        return jnp.sum(x**2)

    return loss


LOOPED_ARGS = (
    [jax.ShapeDtypeStruct((8, 8), jnp.float32)] * 2,
    jax.ShapeDtypeStruct((4, 8), jnp.float32),
)


def test_a_checkpoints_output_saved_by_the_next_one_has_its_line():
    """Under an outer everything_saveable the second call saves its input,
    the first call's output, which JAX reports as an output of the second
    remat2 (whose forward part passes it through): its origin is the first
    call's tanh, on block's line (no origin.source before). Only a value
    saved twice is "the same value as" an earlier residual (the second
    call's were the first's: both calls run one traced body)."""
    loss = make_looped(None)
    spec = "everything_saveable"
    a = remat_tui.analyze(loss, args=LOOPED_ARGS, policy=spec)
    listed = jax_saved_residuals(loss, spec, LOOPED_ARGS, {})
    assert [r.text for r in a.residuals] == listed
    outputs = [r for r in a.residuals if "output of remat2" in r.text]
    assert len(outputs) >= 3
    tanh_line = _line_of(block, "return jnp.tanh")
    for r in outputs:
        assert r.origin.source is not None, r.text
        assert (r.origin.source.file, r.origin.source.line) == (HERE, tanh_line), r.text
        assert r.story.made.frames[0].line == tanh_line
    # A value saved by more than one residual is one value, and only such:
    # JAX keeps as many fewer distinct arrays as it lists repeats. (JAX 0.10
    # saves the first call's tanh twice, by the first call and as the
    # second's input; JAX 0.12 saves its one_minus_square instead, and the
    # tanh once.)
    repeats = [r for r in a.residuals if r.story.made.same_as is not None]
    assert len(repeats) == len(listed) - _values_jax_keeps(loss, spec, LOOPED_ARGS)
    for r in repeats:
        first = a.residuals[r.story.made.same_as]
        assert (first.origin.primitive, first.origin.source) == (
            r.origin.primitive,
            r.origin.source,
        )
    # ... and the second call's values are the second of each alike pair
    places = [
        (r.origin.primitive, r.story.made.ordinal) for r in outputs if r.story.made.same_as is None
    ]
    assert len(set(places)) == len(places), places


def _values_jax_keeps(fn, spec_text: str, args) -> int:
    """How many distinct values the function `jax.vjp` returns holds for the
    backward pass (a pytree of them), run on random inputs: told apart by
    value, as JAX may hold one array for two residuals."""
    from remat_tui.core.setup import policies

    fn = jax.checkpoint(fn, policy=policies.build(policies.parse(spec_text)))
    leaves, tree = jax.tree.flatten(args)
    keys = jax.random.split(jax.random.key(0), len(leaves))
    inputs = [jax.random.normal(k, a.shape, a.dtype) for k, a in zip(keys, leaves, strict=True)]
    _, vjp = jax.vjp(fn, *jax.tree.unflatten(tree, inputs))
    held = [np.asarray(x) for x in jax.tree.leaves(vjp)]
    return len({(x.dtype.str, x.shape, x.tobytes()) for x in held})


# ---- a lax.scan over a jax.checkpoint'ed layer that names its input ------------------


def named_layer(x, w):
    x = checkpoint_name(x, "layer_input")
    return jnp.tanh(x @ w)


def make_scanned(policy):
    def loss(ws, x):
        layer = jax.checkpoint(named_layer, policy=policy)
        y, _ = jax.lax.scan(lambda c, w: (layer(c, w), None), x, ws)
        return jnp.sum(y**2)

    return loss


SCANNED_ARGS = (
    jax.ShapeDtypeStruct((3, 8, 8), jnp.float32),
    jax.ShapeDtypeStruct((4, 8), jnp.float32),
)


def test_a_scanned_layers_saved_input_is_the_previous_layers_output():
    """Under an outer everything_saveable each iteration saves the layer's
    input, the carry (as the zoo's MaxText decoder saves its
    decoder_layer_input): JAX reports it as a stacked output of the scan
    (`output of closed_call`; of `eval_jaxpr` in JAX 0.12), reached back
    out of the layer's checkpoint at an input of the scan's body. Each
    iteration's carry is what the body computes for it, the layer's tanh (no
    origin.source before)."""
    loss = make_scanned(None)
    spec = "everything_saveable"
    a = remat_tui.analyze(loss, args=SCANNED_ARGS, policy=spec)
    listed = jax_saved_residuals(loss, spec, SCANNED_ARGS, {})
    assert [r.text for r in a.residuals] == listed
    stacked = [r for r in a.residuals if r.kind == "output" and r.origin.trip_count == 3]
    # as many as JAX lists (JAX 0.10 saves the tanh and 1 - tanh² besides
    # the input; JAX 0.12 only one_minus_square of the tanh)
    assert len(stacked) == sum(line.startswith("f32[3,4,8] output of ") for line in listed) >= 2
    tanh_line = _line_of(named_layer, "return jnp.tanh")
    for r in stacked:
        assert r.origin.source is not None, r.text
        assert (r.origin.source.file, r.origin.source.line) == (HERE, tanh_line), r.text
        assert r.origin.per_iteration == "f32[4,8]"
        # the carry going in and the carry going out are two values, not one
        assert r.story.made.same_as is None, r.text
    assert "layer_input" in {r.origin.name for r in stacked}


# ---- an NNX block under nnx.remat ----------------------------------------------------


def make_nnx(policy):
    nnx = pytest.importorskip("flax.nnx")

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.linear = nnx.Linear(8, 8, rngs=rngs)

        def __call__(self, x):
            return jnp.tanh(self.linear(x))  # NNX_BLOCK

    class Model(nnx.Module):
        def __init__(self, rngs):
            self.blocks = nnx.List([Block(rngs) for _ in range(2)])

        def __call__(self, x):
            for b in self.blocks:
                x = nnx.remat(b, policy=policy)(x)
            return x

    graphdef, state = nnx.split(nnx.eval_shape(lambda: Model(nnx.Rngs(0))))

    def loss(state, x):
        return jnp.sum(nnx.merge(graphdef, state)(x) ** 2)

    return loss, (state, jax.ShapeDtypeStruct((4, 8), jnp.float32))


def _marked(marker: str) -> int:
    with open(HERE) as f:
        return next(n for n, line in enumerate(f, 1) if line.rstrip().endswith(f"# {marker}"))


@pytest.mark.parametrize("spec", ["everything_saveable", "dots_saveable", "as_written"])
def test_an_nnx_remat_blocks_outputs_point_at_the_model(spec):
    """nnx.remat's wrapper lives in flax/nnx/transforms/general.py (JAX's own
    user frame for its outputs): every origin is a line of this file, the
    remat2 outputs the block's (no origin.source before, under an outer
    everything_saveable)."""
    loss, args = make_nnx(None)
    a = remat_tui.analyze(loss, args=args, policy=spec)
    assert [r.text for r in a.residuals] == jax_saved_residuals(loss, spec, args, {})
    made = [r for r in a.residuals if r.kind != "argument"]
    assert made
    for r in made:
        assert r.origin.source is not None and r.origin.source.file == HERE, r.text
    for r in made:
        if "output of remat2" in r.text:
            assert r.origin.source.line == _marked("NNX_BLOCK"), r.text


# ---- a library's jitted body, shared by a checkpoint and the loss -------------------


def make_shared_take(policy):
    def inside(table, idx):
        return jnp.sin(jnp.take(table, idx, axis=0))

    def loss(table, idx):
        h = jax.checkpoint(inside, policy=policy)(table, idx)
        return jnp.sum(h * jnp.take(table, idx, axis=0))  # LOSS_TAKE

    return loss


SHARED_ARGS = (jax.ShapeDtypeStruct((16, 8), jnp.float32), jax.ShapeDtypeStruct((4,), jnp.int32))


def test_a_shared_library_body_is_placed_by_its_call():
    """jnp.take's jitted body is traced once, so the equations inside the
    loss's take carry the frames of the checkpoint's: the loss's take is
    made on the loss's line, in no site (before: the line running the
    checkpoint, site 1)."""
    loss = make_shared_take(CP.everything_saveable)
    a = remat_tui.analyze(loss, args=SHARED_ARGS)
    assert [r.text for r in a.residuals] == jax_saved_residuals(loss, "as_written", SHARED_ARGS, {})
    line = _marked("LOSS_TAKE")
    outside = [r for r in a.residuals if r.kind != "argument" and "remat2" not in r.text]
    taken = [r for r in outside if r.origin.primitive in ("gather", "select_n", "add", "lt")]
    assert taken
    for r in taken:
        assert (r.origin.source.file, r.origin.source.line) == (HERE, line), r.text
        assert r.origin.site is None
        assert r.story.made.frames[0].line == line


# ---- made by: the origin's line, inside library bodies ------------------------------


@pytest.mark.parametrize("model", [equinox_loop, linen_remat_list], ids=lambda m: m.__name__)
def test_made_by_carries_the_origins_line(model):
    """The story's "made by" starts at the line the residual's origin names:
    an Equinox Llama's and a Linen decoder's residuals made inside jax.nn's
    log_softmax and jnp's indexing (jitted library bodies) said only
    "made by exp", "made by gather" before."""
    a = remat_tui.analyze(model.make_loss(None), args=model.example_args())
    made = [r for r in a.residuals if r.story.made and r.story.made.primitive]
    assert {"exp"} <= {r.origin.primitive for r in made}
    for r in made:
        first = r.story.made.frames[0] if r.story.made.frames else None
        assert first is not None, r.text
        assert (first.file, first.line) == (r.origin.source.file, r.origin.source.line), r.text
