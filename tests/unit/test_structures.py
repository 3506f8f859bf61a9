"""Structures (Contract 15, issue 32): a scan rebuilt as nested or split
scans from the traced program. JAX is the oracle: each structure's residuals
and compiled memory equal those of the same rewrite written out by hand here
and compiled with `jax.value_and_grad`."""

import contextlib
import io
import re
import sys

import jax
import jax.ad_checkpoint
import jax.numpy as jnp
import pytest
from conftest import ROOT

from remat_tui.core.setup.config import Config
from remat_tui.core.trace.analysis import analyze
from remat_tui.core.trace.rebuilt_scans import sqrt_groups
from remat_tui.core.xla.compile.costs import compile_answer
from remat_tui.registry import Target

sys.path.insert(0, f"{ROOT}/tests/models")
import scan_stack  # noqa: E402

CP = jax.checkpoint_policies
WHERE = re.compile(r" from \S+:\d+:\d+ \(.*\)$")


def stack_target(layers=scan_stack.LAYERS, policy=CP.nothing_saveable, fn=None) -> Target:
    fn = fn or scan_stack.make_stack(policy, layers)
    return Target(fn=fn, name="stack", args=scan_stack.make_args(layers))


def by_hand_nested(groups, layers=scan_stack.LAYERS, policy=CP.nothing_saveable):
    """The stack with its scan nested by hand: a scan over `groups`
    checkpointed groups, each a scan over its layers."""
    step = jax.checkpoint(scan_stack.layer, policy=policy)
    per_group = layers // groups

    def stack(params, x):
        grouped = jax.tree.map(lambda a: a.reshape(groups, per_group, *a.shape[1:]), params)

        @jax.checkpoint
        def group(x, group_params):
            return jax.lax.scan(step, x, group_params)

        x, means = jax.lax.scan(group, x, grouped)
        return scan_stack.loss_of(x, means.reshape(layers))

    return stack


def by_hand_split(first, policy_first, policy_rest, layers=scan_stack.LAYERS):
    """The stack as two scans by hand: the first `first` layers checkpointed
    with `policy_first`, the rest with `policy_rest`."""

    def stack(params, x):
        head = jax.tree.map(lambda a: a[:first], params)
        tail = jax.tree.map(lambda a: a[first:], params)
        x, means_head = jax.lax.scan(jax.checkpoint(scan_stack.layer, policy=policy_first), x, head)
        x, means_tail = jax.lax.scan(jax.checkpoint(scan_stack.layer, policy=policy_rest), x, tail)
        return scan_stack.loss_of(x, jnp.concatenate([means_head, means_tail]))

    return stack


def jax_residuals(fn, args) -> list[str]:
    """print_saved_residuals' lines, captured now, each without its source
    location (the hand-written rewrite's lines are this file's; the tool's are
    the user's scan call, where the rewrite goes)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        jax.ad_checkpoint.print_saved_residuals(fn, *args)
    return [WHERE.sub("", line) for line in buf.getvalue().splitlines()]


def value_and_grad_memory(fn, args) -> dict:
    """What XLA says of jax.value_and_grad(fn) compiled by JAX directly, in
    the terms of remat-tui's compiled report (its peak on CPU: arguments +
    outputs + temporaries - aliased)."""
    stats = jax.jit(jax.value_and_grad(fn)).lower(*args).compile().memory_analysis()
    temp, arg = stats.temp_size_in_bytes, stats.argument_size_in_bytes
    out, alias = stats.output_size_in_bytes, stats.alias_size_in_bytes
    return {"temp_bytes": temp, "peak_bytes": arg + out + temp - alias}


def assert_same_as_by_hand(target, config, by_hand):
    """The tool's residuals and compiled peak for `config` are those of
    `by_hand` (JAX's own print_saved_residuals and value_and_grad)."""
    args = target.args()
    tool = analyze(target, config=config)
    assert [WHERE.sub("", r.text) for r in tool.residuals] == jax_residuals(by_hand, args)
    ours = compile_answer(target, config).result
    assert {"temp_bytes": ours.temp_bytes, "peak_bytes": ours.peak_bytes} == (
        value_and_grad_memory(by_hand, args)
    )
    return tool, ours


@pytest.mark.parametrize("groups", [2, sqrt_groups(scan_stack.LAYERS)])
def test_nested_is_the_nesting_written_by_hand(groups):
    target = stack_target()
    tool, ours = assert_same_as_by_hand(
        target, Config.make(structure=f"nested({groups})"), by_hand_nested(groups)
    )
    # One more forward pass over the layers, counted as recomputation.
    as_written = analyze(target)
    assert tool.flops["recompute"] - as_written.flops["recompute"] == pytest.approx(
        as_written.flops["forward"], rel=0.05
    )


def test_the_square_root_choice():
    """nested(G) at the G keeping the fewest carries, G + N/G: the tests above
    cover it for 16 layers (G = 4)."""
    assert [sqrt_groups(n) for n in (16, 24, 36, 64, 7)] == [4, 4, 6, 8, None]


@pytest.mark.parametrize(
    "first, policy_first, policy_rest",
    [
        (4, "everything_saveable", "nothing_saveable"),
        (12, "dots_saveable", "as_written"),
    ],
)
def test_split_is_the_two_scans_written_by_hand(first, policy_first, policy_rest):
    target = stack_target()  # its layers checkpointed with nothing_saveable
    as_policy = {"as_written": CP.nothing_saveable}
    by_hand = by_hand_split(
        first,
        as_policy.get(policy_first) or getattr(CP, policy_first),
        as_policy.get(policy_rest) or getattr(CP, policy_rest),
    )
    config = Config.make(structure=f"split({first}, {policy_first}, {policy_rest})")
    assert_same_as_by_hand(target, config, by_hand)


def test_split_checkpoints_a_body_that_applies_none():
    """A scan whose layer has no checkpoint: split's policies wrap it."""
    target = stack_target(policy=None)
    by_hand = by_hand_split(4, CP.nothing_saveable, CP.everything_saveable)
    config = Config.make(structure="split(4, nothing_saveable, everything_saveable)")
    assert_same_as_by_hand(target, config, by_hand)
