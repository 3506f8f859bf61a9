"""The zoo's oracle checked against JAX on its own (so that a tier failure
is the tool's, not the oracle's): a snippet of each shape the tool prints,
pasted into a copy of the model's file, compiles to the same peak as the
configuration built through the model's factory."""

import jax
import pytest

from zoo import BY_ID, NO_CHECKPOINT
from zoo import oracle as hand

CP = jax.checkpoint_policies
LOOP = BY_ID["loop"]


def line_of(model, text: str) -> int:
    with open(model.path) as fh:
        return next(n for n, line in enumerate(fh, 1) if text in line)


def peak(fn, model=LOOP) -> int:
    return hand.hand_peak(fn, hand.example_args(model))


def test_a_policy_function_of_the_calls_index_pastes_as_the_factory_builds():
    """exact_code.py's shape: a function of the call's index, then its call."""
    line = line_of(LOOP, "jax.checkpoint(layer, policy=policy_of(i))")
    snippet = (
        f"# loops.py:{line}, jax.checkpoint(layer, ...): the 3 calls of layer (sites 1-3), "
        "each with its own policy\n"
        "def layer_policy(i):\n"
        '    """The policy of call i of layer (0 for the first)."""\n'
        "    if i < 1:\n"
        "        return jax.checkpoint_policies.everything_saveable\n"
        "    return jax.checkpoint_policies.nothing_saveable\n"
        "\n"
        "# and where the loop calls it:\n"
        "jax.checkpoint(layer, policy=layer_policy(i))"
    )
    pasted = hand.paste(snippet, LOOP)
    row = {"policy": "as_written", "sites": {"1": "everything_saveable", "2": "nothing_saveable",
                                             "3": "nothing_saveable"}}  # fmt: skip
    by_factory = hand.function_by_hand(LOOP, row, {})
    args = hand.example_args(LOOP)
    assert peak(pasted.function) == peak(by_factory)
    saved = hand.saved_bytes(pasted.function, args)
    assert saved == hand.saved_bytes(by_factory, args)
    assert saved != hand.saved_bytes(LOOP.build((CP.nothing_saveable,) * 3), args)  # it changed


def test_a_site_and_an_outer_policy_paste_as_the_factory_builds():
    line = line_of(LOOP, "jax.checkpoint(layer, policy=policy_of(i))")
    snippet = (
        f"# loops.py:{line} (site 1)\nlayer  # call it directly: no jax.checkpoint\n\n"
        "# around loop\njax.checkpoint(loop, policy=jax.checkpoint_policies.dots_saveable)"
    )
    pasted = hand.paste(snippet, LOOP)
    by_factory = jax.checkpoint(LOOP.build((NO_CHECKPOINT,) * 3), policy=CP.dots_saveable)
    assert peak(pasted.function) == peak(by_factory)


def test_a_library_wrappers_policy_pastes_in_its_call():
    model = BY_ID["linen-scan"]
    line = line_of(model, "nn.remat(Block, policy=self.policy)")
    snippet = f"# linen_scan.py:{line} (site 1)\npolicy=jax.checkpoint_policies.nothing_saveable"
    pasted = hand.paste(snippet, model)
    assert peak(pasted.function, model) == peak(model.build((CP.nothing_saveable,)), model)


def test_two_policies_for_one_line_are_not_pasted():
    model = BY_ID["linen-list"]
    line = line_of(model, "nn.remat(Block, policy=self.policy_of(i))")
    snippet = (
        f"# linen_list.py:{line} (site 1)\npolicy=jax.checkpoint_policies.nothing_saveable\n\n"
        f"# linen_list.py:{line} (site 2)\npolicy=jax.checkpoint_policies.dots_saveable"
    )
    with pytest.raises(hand.NotPasteable, match="given 2 codes at once"):
        hand.paste(snippet, model)
