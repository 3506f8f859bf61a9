"""Structures that regroup stored parameters, verified as pasted (issue 43,
Contract 18 with Contract 15): the code remat-tui prints for a structure is
run here as a user pastes it (the helper defined, the printed call in place
of the scan, for a Linen nn.scan the printed line converting the stored
parameters), and its gradients are the scan as written's, both computed by
hand with `jax.value_and_grad`, within verify's own tolerance rule
(core/xla/verify/leaves.py; its `again` is the code as written compiled
with XLA's backend optimisations off, by hand). `remat-tui verify` of such a
structure passes the stored parameters through the very line the snippet
prints, so a wrong line fails it."""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT
from test_structures_code import pasted as pasted_jax
from test_structures_linen import pasted as pasted_linen

from remat_tui import cli
from remat_tui.core.setup import structure_specs as structures
from remat_tui.core.setup.config import Config
from remat_tui.core.trace import stored_layout
from remat_tui.core.trace.analysis import analyze
from remat_tui.core.xla.verify.leaves import compare_leaf
from remat_tui.core.xla.verify.runs import OTHERWISE, verify
from remat_tui.registry import Target

sys.path.insert(0, f"{ROOT}/tests/models")
import linen_stack  # noqa: E402
import scan_stack  # noqa: E402
import vit_deep_linen  # noqa: E402

LINEN = f"{ROOT}/tests/models/linen_stack.py"
CP = jax.checkpoint_policies
BATCH, WIDTH, LAYERS = 8, 16, 4  # the plain-JAX stack's, tiny


def linen_arrays():
    """linen_stack's parameters (its 8 layers of width 16) and a small batch,
    real arrays."""
    x = 0.5 * jax.random.normal(jax.random.key(1), (BATCH, linen_stack.WIDTH), jnp.float32)
    return linen_stack.Stack().init(jax.random.key(0), x)["params"], x


def linen_target() -> Target:
    return Target(fn=linen_stack.make_loss(), name="loss", args=linen_arrays())


def by_hand(fn, args) -> dict:
    """{'loss', "params[...]"...}: jax.value_and_grad of `fn`, jitted."""
    value, grads = jax.jit(jax.value_and_grad(fn))(*args)
    return {"loss": np.asarray(value), **_named(grads)}


def again(fn, args) -> dict:
    """by_hand's, compiled with XLA's backend optimisations off (verify's OTHERWISE)."""
    lowered = jax.jit(jax.value_and_grad(fn)).lower(*args)
    value, grads = lowered.compile(compiler_options=OTHERWISE)(*args)
    return {"loss": np.asarray(value), **_named(grads)}


def _named(grads) -> dict:
    flat = jax.tree_util.tree_flatten_with_path(grads)[0]
    return {f"params{jax.tree_util.keystr(path)}": np.asarray(g) for path, g in flat}


def compared(got: dict, fn, args) -> list:
    """verify's Leaf for each of `got` against `fn` as written, by hand."""
    want, otherwise = by_hand(fn, args), again(fn, args)
    assert set(got) == set(want)
    return [compare_leaf(path, got[path], want[path], otherwise[path]) for path in sorted(want)]


def restored_by_hand(grads: dict, structure: str, k: int) -> dict:
    """Gradients in the pasted layout read back to [N, ...] by hand: the
    layers' order the helpers keep (nested: group by group; split: first, rest)."""
    scanned = grads["layers"]
    if structure == "nested":
        back = jax.tree.map(lambda g: g.reshape(-1, *g.shape[2:]), scanned["layers"])
    else:
        back = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), scanned["first"], scanned["rest"])
    return {**grads, "layers": back}


STRUCTURES = ["nested(4)", "split(3, everything_saveable, as_written)"]


@pytest.mark.parametrize("structure", STRUCTURES)
def test_the_pasted_linen_snippet_with_its_conversion_computes_the_scan_as_written(structure):
    """The Done-when of issue 43: the snippet pasted as printed, its line
    converting the stored parameters, gives the scan as written's loss and
    gradients; converted inside the loss (gradients by the stored paths) and
    once outside it, as a user converts a checkpoint (gradients read back)."""
    target = linen_target()
    args = target.args
    python = analyze(target, config=Config.make(structure=structure)).python
    as_written = linen_stack.make_loss()
    shares = {}

    inside = pasted_linen(python)
    leaves = compared(by_hand(inside, args), as_written, args)
    assert all(leaf.within for leaf in leaves), [leaf.to_dict() for leaf in leaves]
    shares["converted in the loss"] = sum(leaf.bitwise for leaf in leaves) / len(leaves)

    outside = pasted_linen(python, moved_in_loss=False)
    params, x = args
    value, grads = jax.jit(jax.value_and_grad(outside))(outside.move(params), x)
    kind, k = structure.split("(")[0], int(structure.split("(")[1].split(",")[0].rstrip(")"))
    got = {"loss": np.asarray(value), **_named(restored_by_hand(grads, kind, k))}
    leaves = compared(got, as_written, args)
    assert all(leaf.within for leaf in leaves), [leaf.to_dict() for leaf in leaves]
    shares["converted once outside"] = sum(leaf.bitwise for leaf in leaves) / len(leaves)
    print(f"{structure}: bitwise-equal share", shares)


def test_a_wrong_conversion_line_is_caught_by_hand_and_by_verify(monkeypatch):
    """The check can fail: the groups transposed ([N/G, G] read as [G, N/G])
    run the layers in another order; so does verify's run, which evaluates
    the printed line itself."""
    target = linen_target()
    python = analyze(target, config=Config.make(structure="nested(4)")).python
    right = "p.reshape(4, 2, *p.shape[1:])"
    wrong = "p.reshape(2, 4, *p.shape[1:]).swapaxes(0, 1)"
    assert right in python
    leaves = compared(by_hand(pasted_linen(python.replace(right, wrong)), target.args),
                      linen_stack.make_loss(), target.args)  # fmt: skip
    assert not all(leaf.within for leaf in leaves)

    conversion = stored_layout.conversion

    def transposed(structure, length):
        return conversion(structure, length).replace(right, wrong)

    v = verify(target, Config.make(structure="nested(4)"))
    assert v.verdict == "equal" and right in v.parameters
    monkeypatch.setattr(stored_layout, "conversion", transposed)
    printed = analyze(target, config=Config.make(structure="nested(4)")).python
    assert wrong in printed  # the snippet prints the line verify runs
    v = verify(target, Config.make(structure="nested(4)"))
    assert v.verdict == "differ" and wrong in v.parameters
    assert {leaf.path for leaf in v.differing} >= {"loss", "params['layers']['Dense_0']['kernel']"}


@pytest.mark.parametrize("structure", STRUCTURES)
def test_verify_runs_the_printed_line_and_agrees_with_the_pasted_snippet(structure):
    """verify's leaves are named by the code as written's paths, its
    parameters line quotes the snippet's, and its values are those of the
    pasted snippet by hand within its tolerance."""
    target = linen_target()
    config = Config.make(structure=structure)
    python = analyze(target, config=config).python
    v = verify(target, config)
    assert v.ok, [leaf.to_dict() for leaf in v.differing]
    print(f"verify {structure}: {v.verdict}, {v.bitwise_leaves} of {len(v.leaves)} bitwise")
    (line,) = [x for x in python.splitlines() if x.startswith("#     scanned = ")]
    text = line.removeprefix("#     scanned = ")
    assert v.parameters == (
        f"params['layers'] converted by the snippet's line, scanned = {text}, "
        "and read back in the layout its helper keeps"
    )
    assert v.to_dict()["parameters"] == v.parameters
    pasted = by_hand(pasted_linen(python), target.args)
    assert [leaf.path for leaf in v.leaves] == list(pasted)
    for leaf in v.leaves:
        want = by_hand(linen_stack.make_loss(), target.args)[leaf.path]
        assert np.max(np.abs(pasted[leaf.path] - want), initial=0) <= leaf.tolerance


def test_verify_of_a_structure_on_a_linen_model_exits_0_and_says_it_converted(capsys):
    assert cli.main(["verify", LINEN, "--structure", "nested(4)", "--no-cache"]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first.startswith("same gradients")
    assert second.startswith("  parameters: params['layers'] converted by the snippet's line")
    assert cli.main(["verify", LINEN, "--structure", "nested(2)", "--format", "json"]) == 0
    said = json.loads(capsys.readouterr().out)["gradients"]
    assert said["verdict"] in ("equal", "agree") and "reshape(2, 4," in said["parameters"]


def plain_target() -> Target:
    keys = jax.random.split(jax.random.key(3), 3)
    params = {
        "w": 0.3 * jax.random.normal(keys[0], (LAYERS, WIDTH, WIDTH), jnp.float32),
        "b": 0.1 * jax.random.normal(keys[1], (LAYERS, WIDTH), jnp.float32),
    }
    x = jax.random.normal(keys[2], (BATCH, WIDTH), jnp.float32)
    return Target(fn=scan_stack.make_stack(CP.nothing_saveable, LAYERS), name="stack",
                  args=(params, x))  # fmt: skip


def test_the_pasted_jax_nested_scan_computes_the_scan_as_written():
    """The plain-JAX snippet regroups inside the step: pasted as printed it
    gives the scan as written's gradients, and verify converts nothing."""
    target = plain_target()
    config = Config.make(structure="nested(2)")
    python = analyze(target, config=config).python
    step = jax.checkpoint(scan_stack.layer, policy=CP.nothing_saveable)
    leaves = compared(by_hand(pasted_jax(python, step), target.args), target.fn, target.args)
    assert all(leaf.within for leaf in leaves), [leaf.to_dict() for leaf in leaves]
    print("plain nested(2): bitwise-equal share", sum(x.bitwise for x in leaves) / len(leaves))
    v = verify(target, config)
    assert v.ok and v.parameters is None and v.to_dict()["parameters"] is None


def test_the_stored_parameters_are_found_by_the_scans_name():
    params, x = jax.eval_shape(linen_arrays)
    nested = structures.parse("nested(4)")
    found = stored_layout.find_conversion(nested, 8, "layers", (params, x), ["params", "x"])
    assert found.where == "params['layers']" and found.keys == ("layers",)
    missing = stored_layout.find_conversion(nested, 8, "blocks", (params, x), ["params", "x"])
    assert "none is" in missing
    other = stored_layout.find_conversion(nested, 6, "layers", (params, x), ["params", "x"])
    assert "none is" in other  # a dict of that name whose leaves are not [6, ...]
    # One module down (a ViT's encoder blocks, nn.scan'd inside its Transformer):
    deep = vit_deep_linen.example_args()
    found = stored_layout.find_conversion(
        structures.parse("nested(3)"), vit_deep_linen.DEPTH, "encoderblock", deep, ["params"]
    )
    assert found.where == "params['Transformer']['encoderblock']"
    assert found.keys == ("Transformer", "encoderblock") and found.position == 0
    # Stored twice (the parameters and, say, an optimizer's copy): not guessed.
    twice = stored_layout.find_conversion(nested, 8, "layers", (params, params), ["p", "q"])
    assert "several are" in twice
    no_name = stored_layout.find_conversion(nested, 8, None, (params, x), ["params", "x"])
    assert "no name=" in no_name
