"""An offloaded residual comes back from host memory through a device_put in
the backward pass: a transfer, which the panes mark as one, not as forward
work done again (↻), and which the recomputation does not count."""

import re

import jax.numpy as jnp
from conftest import jax_saved_residuals
from jax.ad_checkpoint import checkpoint_name

import remat_tui
from remat_tui.core.setup.config import Config
from remat_tui.core.trace import recomputation
from remat_tui.core.trace.configured import as_target
from remat_tui.core.trace.traced import trace_config
from remat_tui.notebook import analysis_html, terminal
from remat_tui.report.phrases import line_marks

POLICY = (
    "save_and_offload_only_these_names(names_which_can_be_saved=[], "
    "names_which_can_be_offloaded=['h'])"
)
ARGS = (jnp.ones((4, 4)), jnp.ones(4))


def f(W, x):
    h = checkpoint_name(jnp.sin(W @ x), "h")
    return jnp.sum(jnp.cos(W @ h))


def transfer_equations(a) -> list[list[int]]:
    """The backward pane's device_put equations reading a host input, as
    line ranges, read off JAX's own text: `v:f32[4] = device_put[` down to
    the line closing it with its operand."""
    lines = a.backward.lines
    host_vars = set(re.findall(r"(\w+):\w+<host>", "\n".join(lines)))
    found = []
    for i, line in enumerate(lines):
        if re.search(r"= device_put\[", line):
            end = next(j for j in range(i, len(lines)) if lines[j].lstrip().startswith("]"))
            if set(lines[end].split()[1:]) & host_vars:
                found.append(list(range(i, end + 1)))
    return found


def test_bringing_back_from_host_is_a_transfer_not_recomputation():
    a = remat_tui.analyze(f, args=ARGS, policy=POLICY)
    assert [r.text for r in a.residuals] == jax_saved_residuals(f, POLICY, ARGS, {})
    assert any(r.memory == "host" for r in a.residuals)
    transfers = transfer_equations(a)
    assert transfers, "JAX brings the offloaded value back with a device_put"
    for lines in transfers:
        assert set(lines) <= a.backward.transfer_lines
        assert not set(lines) & a.backward.recompute_lines
        # marked once, where the equation begins (its further lines carry no copy)
        assert "from host" in line_marks(a.backward, lines[0])
        for i in lines:
            assert "↻" not in line_marks(a.backward, i)
    # the rest of the rematerialised body is still recomputation
    assert a.backward.recompute_lines


def test_the_transfer_is_not_counted_as_recomputation():
    """The count read from the backward pass leaves the transfer out, and the
    linear program's reading (compare's rows) agrees with it."""
    t = trace_config(as_target(f, ARGS, None), Config.make(POLICY))
    bwd = t.backward()
    traced = recomputation.recomputation(
        bwd, set(bwd.invars[: t.backward_residuals]), set(bwd.invars[t.backward_residuals :])
    )
    assert len(traced.transfer_ids) == 1
    assert not traced.transfer_ids & traced.eqn_ids
    assert traced.count == len(traced.eqn_ids)  # the leaves re-run, the transfer not among them
    read = recomputation.from_linear(t.linear)
    if read is not None:
        assert read.count == traced.count


def test_notebook_displays_say_from_host():
    a = remat_tui.analyze(f, args=ARGS, policy=POLICY)
    assert "from host" in analysis_html.render(a)
    assert "from host" in terminal.pane(a.backward).plain
