"""A Linen nn.scan of `nn.remat(Block, prevent_cse=False)` (issue 42): the
nested structure's Linen code keeps the user's prevent_cse for the groups'
checkpoint as the JAX form does (`nested_scan(..., prevent_cse=False)`), so
the printed text, pasted as a user would (test_structures_linen.py's
`pasted`), compiles with `jax.value_and_grad` to the reported peak and
gives the reported residuals."""

import sys

from conftest import ROOT, checkpoints_prevent_cse
from test_structures import WHERE, jax_residuals, value_and_grad_memory
from test_structures_linen import CALL, pasted

from remat_tui.core.setup.config import Config
from remat_tui.core.trace.analysis import analyze
from remat_tui.core.xla.compile.costs import compile_answer
from remat_tui.registry import Target

sys.path.insert(0, f"{ROOT}/tests/models")
import linen_stack_cse  # noqa: E402


def test_the_nested_linen_code_keeps_the_users_prevent_cse():
    target = Target(fn=linen_stack_cse.loss, name="loss", args=linen_stack_cse.example_args)
    config = Config.make(structure="nested(4)")
    reported = analyze(target, config=config)
    assert [s.prevent_cse for s in reported.sites] == [False]
    (call,) = (m.group(2) for m in CALL.finditer(reported.python))
    assert call.endswith(", prevent_cse=False)"), call  # the groups' nn.remat, not only the block's
    fn = pasted(reported.python.replace("linen_stack_cse", "linen_stack"))
    args = target.args()
    # Every checkpoint of the pasted program, the groups' included, as the user wrote hers.
    assert checkpoints_prevent_cse(fn, *args) == [False, False]
    assert jax_residuals(fn, args) == [WHERE.sub("", r.text) for r in reported.residuals]
    compiled = compile_answer(target, config).result
    assert value_and_grad_memory(fn, args) == {
        "temp_bytes": compiled.temp_bytes,
        "peak_bytes": compiled.peak_bytes,
    }
