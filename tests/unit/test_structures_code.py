"""The code to write for a structure (Contract 15, issue 32 item 3): the text
remat-tui prints is run here, on the test stack, as a user would paste it
(the helper defined, the printed call made in place of the scan's, each
printed step built), and the program it makes, compiled with
`jax.value_and_grad`, has the compiled peak and the residuals remat-tui
reported for the structure."""

import re
import sys

import jax
import pytest
from conftest import ROOT
from test_structures import WHERE, jax_residuals, stack_target, value_and_grad_memory

from remat_tui.core.setup.config import Config
from remat_tui.core.trace.analysis import analyze
from remat_tui.core.xla.compile.costs import compile_answer

sys.path.insert(0, f"{ROOT}/tests/models")
import scan_stack  # noqa: E402

CALL = re.compile(r"^#\s+carry, ys = (.+)$", re.M)
STEP = re.compile(r"^# with (step_\w+) = (.+?)(  \(as written\))?$", re.M)


def pasted(python: str, step):
    """The stack with its scan replaced as `python` (the tool's snippet) says:
    the helper executed, the steps it names built, the call it prints made
    where the stack calls jax.lax.scan(step, init, xs)."""
    helper: dict = {}
    exec(python, helper)  # noqa: S102 (the code the tool prints, run as a user would)
    names = {"jax": jax, "layer": scan_stack.layer}
    steps = {name: eval(expr, names) for name, expr, _ in STEP.findall(python)}  # noqa: S307
    (call,) = CALL.findall(python)

    def stack(params, x):
        scope = {**helper, **steps, "step": step, "init": x, "xs": params}
        x, means = eval(call, scope)  # noqa: S307
        return scan_stack.loss_of(x, means)

    return stack


@pytest.mark.parametrize(
    "structure",
    [
        "nested(4)",
        "split(4, everything_saveable, as_written)",
        "split(12, as_written, dots_saveable)",
    ],
)
def test_the_printed_code_compiles_to_what_was_reported(structure):
    target = stack_target()
    config = Config.make(structure=structure)
    reported = analyze(target, config=config)
    assert "# The helper, defined once:" in reported.python
    step = jax.checkpoint(scan_stack.layer, policy=jax.checkpoint_policies.nothing_saveable)
    fn = pasted(reported.python, step)
    args = target.args()
    assert jax_residuals(fn, args) == [WHERE.sub("", r.text) for r in reported.residuals]
    compiled = compile_answer(target, config).result
    assert value_and_grad_memory(fn, args) == {
        "temp_bytes": compiled.temp_bytes,
        "peak_bytes": compiled.peak_bytes,
    }


def test_the_snippet_says_where_and_what_the_step_is():
    reported = analyze(stack_target(), config=Config.make(structure="nested(2)"))
    head = reported.python.splitlines()
    with open(scan_stack.__file__) as fh:
        line = next(i for i, text in enumerate(fh, 1) if "jax.lax.scan(" in text)
    where = f"# scan_stack.py:{line}:"
    assert head[0] == f"{where} its scan of 16 layers as 2 checkpointed groups of 8."
    assert "step being jax.checkpoint(layer, ...)" in head[1]
