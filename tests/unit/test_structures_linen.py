"""The Linen form of a structure's code (Contract 15, issue 32 item 3): for a
scan Linen's nn.scan made, the text remat-tui prints is run here on the
Linen stack (tests/models/linen_stack.py) as a user would paste it: the
helper defined, the printed call put in place of the stack's nn.scan (the
rest of the module as written), the stored parameters moved by the printed
line. The program it makes, compiled with `jax.value_and_grad`, has the
compiled peak and the residuals remat-tui reported for the structure.

The parameters are moved inside the loss, before `apply`, as the stack's
own [N, ...] parameters come in: so the pasted program is the one remat-tui
builds from the traced program (which reshapes or slices the scan's xs in
place of the user's nn.scan), and the residuals are compared whole. A user
who converts a stored tree once, outside the loss, passes the [G, N/G, ...]
parameters as arguments instead: the same arrays, which print_saved_residuals
then calls arguments rather than outputs of a reshape or a slice
(`test_moved_once_outside_only_the_provenance_differs`)."""

import re
import sys
from types import SimpleNamespace

import flax.linen as nn
import jax
import pytest
from conftest import ROOT
from test_structures import WHERE, jax_residuals, value_and_grad_memory

from remat_tui.core.places import Source
from remat_tui.core.setup import structure_specs as structures
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.structure_specs import HELPER_MARK
from remat_tui.core.trace.analysis import analyze
from remat_tui.core.trace.linen_call import read_scan_call
from remat_tui.core.trace.structure_code_flax import linen_code
from remat_tui.core.xla.compile.costs import compile_answer
from remat_tui.registry import Target

sys.path.insert(0, f"{ROOT}/tests/models")
import linen_stack  # noqa: E402
import vit_linen  # noqa: E402

CALL = re.compile(r"^(\w+) = ((?:nested|split)_nn_scan\(.*\))$", re.M)
MOVE = re.compile(r"^#\s+(scanned = .+)$", re.M)


def linen_target() -> Target:
    return Target(fn=linen_stack.make_loss(), name="loss", args=linen_stack.example_args)


def pasted(python: str, moved_in_loss: bool = True):
    """linen_stack's loss with its nn.scan replaced as `python` (the tool's
    snippet) says, and the parameters moved by its line: in the loss
    (moved_in_loss) or by the caller (the loss's `move`)."""
    helper: dict = {}
    exec(python.partition(HELPER_MARK)[2], helper)  # noqa: S102 (as a user would paste it)
    assigned, expression = CALL.search(python).groups()
    move = MOVE.search(python).group(1)

    class Stack(nn.Module):  # linen_stack.Stack, its nn.scan(...) replaced by the printed call
        policy: object = linen_stack.CP.nothing_saveable

        @nn.compact
        def __call__(self, x):
            names = {**helper, "Block": linen_stack.Block, "LAYERS": linen_stack.LAYERS}
            layers = eval(expression, {**names, "self": self})  # noqa: S307
            x, means = layers(name="layers", width=linen_stack.WIDTH)(x)
            return x, means

    def moved(params):
        scope = {"jax": jax, "scanned": params["layers"]}
        exec(move, scope)  # noqa: S102
        return {**params, "layers": scope["scanned"]}

    def loss(params, x):
        params = moved(params) if moved_in_loss else params
        return linen_stack.loss_of(*Stack().apply({"params": params}, x))

    assert assigned == "layers"
    loss.move, loss.model = moved, Stack()
    return loss


@pytest.mark.parametrize("structure", ["nested(4)", "split(3, everything_saveable, as_written)"])
def test_the_printed_linen_code_compiles_to_what_was_reported(structure):
    target = linen_target()
    config = Config.make(structure=structure)
    reported = analyze(target, config=config)
    fn = pasted(reported.python)
    params, x = args = target.args()
    # the printed line moves the parameters to the layout the pasted module makes
    made = jax.eval_shape(fn.model.init, jax.random.key(0), x)["params"]
    assert jax.tree.map(lambda a: a.shape, jax.eval_shape(fn.move, params)) == jax.tree.map(
        lambda a: a.shape, made
    )
    assert jax_residuals(fn, args) == [WHERE.sub("", r.text) for r in reported.residuals]
    compiled = compile_answer(target, config).result
    assert value_and_grad_memory(fn, args) == {
        "temp_bytes": compiled.temp_bytes,
        "peak_bytes": compiled.peak_bytes,
    }


def test_a_wrong_snippet_is_caught():
    """The comparison can fail: the snippet with another group count keeps
    other carries, so its residuals are not those reported."""
    reported = analyze(linen_target(), config=Config.make(structure="nested(4)"))
    wrong = reported.python.replace("groups=4", "groups=2")
    wrong = wrong.replace("reshape(4, 2,", "reshape(2, 4,")
    assert wrong != reported.python
    expected = [WHERE.sub("", r.text) for r in reported.residuals]
    assert jax_residuals(pasted(wrong), linen_target().args()) != expected


def test_moved_once_outside_only_the_provenance_differs():
    reported = analyze(linen_target(), config=Config.make(structure="nested(4)"))
    fn = pasted(reported.python, moved_in_loss=False)
    params, x = linen_target().args()
    outside = jax_residuals(fn, (jax.eval_shape(fn.move, params), x))
    inside = jax_residuals(pasted(reported.python), (params, x))
    assert len(outside) == len(inside) and outside != inside
    for out, ins in zip(outside, inside, strict=True):
        if out != ins:  # a group's parameters: an argument now, a reshape's output before
            assert "from the argument" in out and "output of reshape" in ins
            assert out.split()[0] == ins.split()[0]
    assert value_and_grad_memory(fn, (jax.eval_shape(fn.move, params), x)) == (
        value_and_grad_memory(pasted(reported.python), (params, x))
    )


def test_the_nn_scan_call_is_read_from_the_source():
    """The user's own nn.scan arguments, read where its module is called:
    inline (vit_linen) or through the variable it is assigned to (linen_stack)."""
    with open(vit_linen.__file__) as fh:
        line = next(i for i, text in enumerate(fh, 1) if "nn.scan(" in text)
    call = read_scan_call(Source(vit_linen.__file__, line, 1, "__call__"))
    assert call.kwargs["in_axes"] == "nn.broadcast" and call.kwargs["length"] == "self.depth"
    assert call.remat[1] == "Encoder1DBlock" and call.remat[2]["static_argnums"] == "(2,)"
    assert call.name == "encoderblock" and call.assigned is None
    reported = analyze(linen_target(), config=Config.make(structure="nested(2)"))
    assert "layers = nested_nn_scan(nn.remat(Block, policy=self.policy), groups=2" in (
        reported.python
    )
    assert 'variable_axes={"params": 0}, split_rngs={"params": True}' in reported.python


def test_where_the_call_cannot_be_read_the_snippet_says_what_to_copy():
    scan = SimpleNamespace(length=8, source=Source("/nowhere/model.py", 12, 9, "__call__"))
    for spec in ("nested(2)", "split(3, dots_saveable, as_written)"):
        code, helper = linen_code(scan, structures.parse(spec), read_scan_call(scan.source))
        assert "model.py:12" in code and "SCAN_KWARGS" in code and "BLOCK" in code
        assert "variable_axes, split_rngs, in_axes" in code
        assert ("nested_nn_scan(BLOCK, groups=2, length=8" in code) == spec.startswith("nested")
        assert f"def {'nested' if spec.startswith('nested') else 'split'}_nn_scan(" in helper
