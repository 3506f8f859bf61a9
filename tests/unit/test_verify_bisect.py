"""Issue 43, "explain a difference": `verify` names the decisions a
configuration makes against the code as written and, where the gradients
differ, bisects them to the fewest that move them (core/xla/verify/bisect.py).
The oracle: the gradients computed by hand with `jax.value_and_grad` under
`jax.checkpoint(loss, policy=...)`, at test time."""

import json
import math
import os

import jax
import numpy as np
from conftest import ROOT

import remat_tui
from remat_tui import cli
from remat_tui.core.setup.config import Config
from remat_tui.core.xla.verify.bisect import verify_explained
from remat_tui.core.xla.verify.decisions import (
    NAME,
    POLICY,
    REST,
    SITE,
    STRUCTURE,
    Decision,
    configure,
    decisions,
    minimal,
)
from remat_tui.report.verify import render

EIGHT = os.path.join(ROOT, "tests", "models", "eight_names.py")


def eight_names():
    target = remat_tui.load_targets(EIGHT)["loss"]
    return target, target.fn.__globals__


def by_hand(module, policy, args):
    """{leaf path: value} of the loss and its gradients under `policy`
    (None: as written), the draws' count reset first."""
    module["draws"][0] = 0
    value, grads = jax.jit(jax.value_and_grad(module["loss_under"](policy)))(*args)
    module["draws"][0] = 0
    return {"loss": np.asarray(value), **{
        f"params{jax.tree_util.keystr(path)}": np.asarray(g)
        for path, g in jax.tree_util.tree_flatten_with_path(grads)[0]
    }}  # fmt: skip


def moved(got, want, tolerance):
    """The leaves `got` moves past `tolerance` (verify's, by path) from `want`."""
    return {
        path for path in want
        if np.max(np.abs(got[path].astype(np.float64) - want[path])) > tolerance[path]
    }  # fmt: skip


def test_recomputing_every_name_is_bisected_to_the_one_that_runs_the_callback_again():
    target, module = eight_names()
    names, noisy = module["NAMES"], module["NOISY"]
    module["draws"][0] = 0
    v = verify_explained(target, Config.make("save_only_these_names()"))
    assert v.verdict == "differ"
    # Every name's recomputation is a decision, and the policy's rest.
    assert [d.key for d in v.decisions if d.kind == NAME] == list(names)
    assert {d.action for d in v.decisions if d.kind == NAME} == {"recompute"}
    assert [d.kind for d in v.decisions if d.kind != NAME] == [REST]
    assert v.culprit is not None
    assert [(d.kind, d.key) for d in v.culprit.decisions] == [(NAME, noisy)]

    # JAX says the same: recomputing that name alone moves the gradients past
    # verify's tolerance; recomputing the other seven moves none.
    args = target.args()
    tolerance = {leaf.path: leaf.tolerance for leaf in v.leaves}
    want = by_hand(module, None, args)
    others = [n for n in names if n != noisy]
    only_noisy = jax.checkpoint_policies.save_only_these_names(*others)
    all_but_noisy = jax.checkpoint_policies.save_only_these_names(noisy)
    assert moved(by_hand(module, only_noisy, args), want, tolerance)
    assert not moved(by_hand(module, all_but_noisy, args), want, tolerance)
    assert v.culprit.leaf in moved(by_hand(module, only_noisy, args), want, tolerance)

    # Cheap: a binary search, at most 2·k·log2(n) verifies for k = 1 of n.
    n = len(v.decisions)
    assert 1 <= v.culprit.verifies <= 2 * math.log2(n)

    # Said in one line, with the name's line and the callback's.
    with open(EIGHT) as fh:
        text = fh.read().splitlines()
    draw = next(i for i, t in enumerate(text, 1) if "jax.pure_callback(_draw" in t)
    made = next(i for i, t in enumerate(text, 1) if "checkpoint_name(z, name)" in t)
    assert v.culprit.line.startswith(f"recomputing {noisy!r} (eight_names.py:{made}) changes ")
    assert v.culprit.line.endswith(
        f": the pure_callback at eight_names.py:{draw} runs again in the backward pass"
    )
    assert v.culprit.line in render(v, "text", "eight_names.py:loss")
    gradients = json.loads(render(v, "json", "eight_names.py:loss"))["gradients"]
    assert len(gradients["decisions"]) == n
    assert [d["key"] for d in gradients["culprit"]["decisions"]] == [noisy]
    assert gradients["culprit"]["line"] == v.culprit.line


def test_a_configuration_that_agrees_names_its_decisions_and_no_culprit():
    target, module = eight_names()
    module["draws"][0] = 0
    v = remat_tui.verify(target, policy=f"save_only_these_names({module['NOISY']!r})")
    assert v.ok and v.culprit is None
    assert module["NOISY"] not in {d.key for d in v.decisions}
    assert len([d for d in v.decisions if d.kind == NAME]) == len(module["NAMES"]) - 1
    assert json.loads(render(v, "json", "loss"))["gradients"]["culprit"] is None


def test_a_subset_of_decisions_is_a_configuration_with_the_rest_as_written():
    config = Config.make(
        "save_and_offload_only_these_names(names_which_can_be_saved=['a'], "
        "names_which_can_be_offloaded=['b'], offload_src='device', offload_dst='pinned_host')",
        {"block": "nothing_saveable", 2: "dots_saveable"},
        structure="nested(2)",
    )
    found = decisions(config, {"a": "m.py:1", "b": "m.py:2", "c": "m.py:3"})
    by_key = {(d.kind, d.key): d for d in found}
    assert [(d.kind, d.key, d.action) for d in found] == [
        (REST, None, None), (NAME, "b", "offload"), (NAME, "c", "recompute"),
        (SITE, 2, None), (SITE, "block", None), (STRUCTURE, None, None),
    ]  # fmt: skip
    assert by_key[(NAME, "c")].what == "recomputing 'c' (m.py:3)"
    assert configure(config, found, found) == config
    assert configure(config, found, []) == Config()
    # One name's decision: every other name saved, on device; no site, no structure.
    assert configure(config, found, [by_key[(NAME, "c")]]) == Config.make(
        "save_only_these_names('a', 'b')"
    )
    assert configure(config, found, [by_key[(SITE, "block")]]) == Config.make(
        sites={"block": "nothing_saveable"}
    )
    whole = decisions(Config.make("nothing_saveable"), {"a": "m.py:1"})
    assert [d.kind for d in whole] == [POLICY]


def test_the_search_finds_the_fewest_decisions_within_its_bound():
    items = [Decision(NAME, str(i), i) for i in range(16)]
    for needed in ({5}, {0}, {15}, {3, 11}, {1, 2, 14}):
        asked = []

        def differs(chosen, needed=needed, asked=asked):
            asked.append(chosen)
            return needed <= {d.key for d in chosen}

        assert {d.key for d in minimal(items, differs)} == needed
        assert len(asked) <= 2 * len(needed) * math.log2(len(items))


def test_the_command_names_the_culprit_in_one_line(capsys):
    _, module = eight_names()
    module["draws"][0] = 0
    assert cli.main(["verify", EIGHT, "--policy", "save_only_these_names()"]) == 1
    out, err = capsys.readouterr()
    culprit = [line for line in out.splitlines() if line.startswith("  culprit: ")]
    assert len(culprit) == 1 and culprit[0].startswith(
        f"  culprit: recomputing {module['NOISY']!r}"
    )
    assert "configurations verified to find it" in culprit[0]
    progress = [line for line in err.splitlines() if "] verifying policy " in line]
    assert progress and progress[0].startswith("remat-tui: [1/")  # one line per verify
    assert "Traceback" not in err
