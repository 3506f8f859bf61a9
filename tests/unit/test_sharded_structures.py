"""Structures of sharded scans (issue 42, Wanted 1; Contracts 15 and 17): on
the zoo's FSDP decoder (8 layers, weights stacked and sharded over an
explicit 4-device `data` mesh, a `jax.checkpoint(..., prevent_cse=False)`
layer), nested(G) and split rows are the same structure written here by
hand with the same shardings (the stacked weights regrouped with
`reshape(..., out_sharding=...)`, the layer axes unsharded), compiled by JAX
with `jax.value_and_grad`; the printed code, pasted into the model's file,
compiles to the reported peak; compare and suggest complete on it; a
1-device explicit mesh builds the same structures."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from conftest import ROOT
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from test_structures import WHERE, jax_residuals

import remat_tui
from remat_tui.core.setup.config import Config
from remat_tui.core.trace.analysis import analyze
from remat_tui.core.xla.compile.costs import compile_answer
from remat_tui.registry import Target

sys.path.insert(0, os.path.join(ROOT, "tests"))
from zoo import BY_ID, load_module  # noqa: E402
from zoo import oracle as hand  # noqa: E402

MODEL = BY_ID["fsdp"]
fsdp = load_module(MODEL.path)
CP = jax.checkpoint_policies
SPLIT = "split(2, as_written, nothing_saveable)"


def the_target(devices=None) -> Target:
    """The registered target, its arguments over `devices` (the first 4
    CPU devices unless given)."""
    target = remat_tui.load_targets(MODEL.path)["loss"]
    if devices is None:
        return target
    return Target(fn=target.fn, name="loss", args=lambda: fsdp.example_args(devices=devices))


def layer(policy):
    return jax.checkpoint(fsdp.decoder_layer, policy=policy, prevent_cse=False)


def by_hand_nested(groups):
    """The decoder with its scan nested by hand: the stacked weights (each
    P(None, "data", None)) regrouped to P(None, None, "data", None), a scan
    over `groups` checkpointed groups of scans over their layers, the
    stacked auxiliary losses (P(None, "data") per group) flattened back."""
    per_group = fsdp.LAYERS // groups

    def loss(params, x):
        mesh = jax.typeof(x).sharding.mesh
        grouped = jax.tree.map(
            lambda w: jnp.reshape(
                w, (groups, per_group, *w.shape[1:]),
                out_sharding=NamedSharding(mesh, P(None, None, "data", None)),
            ),
            params,
        )  # fmt: skip

        def group(x, group_params):
            return jax.lax.scan(layer(fsdp.WRITTEN), x, group_params)

        x, aux = jax.lax.scan(jax.checkpoint(group, prevent_cse=False), x, grouped)
        aux = jnp.reshape(aux, (fsdp.LAYERS, -1), out_sharding=NamedSharding(mesh, P(None, "data")))
        return jnp.mean(x**2) + jnp.mean(aux)

    return loss


def by_hand_split(first, policy_first, policy_rest):
    """The decoder as two scans by hand: the first `first` layers under
    `policy_first`, the rest under `policy_rest`."""

    def loss(params, x):
        head = jax.tree.map(lambda w: w[:first], params)
        tail = jax.tree.map(lambda w: w[first:], params)
        x, aux_head = jax.lax.scan(layer(policy_first), x, head)
        x, aux_tail = jax.lax.scan(layer(policy_rest), x, tail)
        return jnp.mean(x**2) + jnp.mean(jnp.concatenate([aux_head, aux_tail]))

    return loss


BY_HAND = {
    "nested(2)": lambda: by_hand_nested(2),
    "nested(4)": lambda: by_hand_nested(4),
    SPLIT: lambda: by_hand_split(2, fsdp.WRITTEN, CP.nothing_saveable),
}


@pytest.mark.parametrize("structure", list(BY_HAND))
def test_a_structure_is_the_same_structure_written_by_hand_with_its_shardings(structure):
    target = the_target()
    config = Config.make(structure=structure)
    args = target.args()
    by_hand = BY_HAND[structure]()
    tool = analyze(target, config=config)
    assert [WHERE.sub("", r.text) for r in tool.residuals] == jax_residuals(by_hand, args)
    reported = compile_answer(target, config).result.peak_bytes
    assert reported == hand.hand_peak(by_hand, args)
    # The printed code, pasted in place of the scan's call, compiles to it.
    assert "prevent_cse=False" in tool.python
    if structure.startswith("nested"):
        assert "out_sharding=" in tool.python
    pasted = hand.paste(tool.python, MODEL)
    assert "jax.lax.scan(layer, x, params)" not in pasted.source
    assert hand.hand_peak(pasted.function, args) == reported


def test_a_one_device_explicit_mesh_builds_the_same_structure():
    target = the_target(devices=jax.devices("cpu")[:1])
    config = Config.make(structure="nested(4)")
    args = target.args()
    assert jax.typeof(args[1]).sharding.mesh.shape == {"data": 1}
    by_hand = by_hand_nested(4)
    tool = analyze(target, config=config)
    assert [WHERE.sub("", r.text) for r in tool.residuals] == jax_residuals(by_hand, args)
    assert compile_answer(target, config).result.peak_bytes == hand.hand_peak(by_hand, args)


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run(
        [sys.executable, "-m", "remat_tui", *args], capture_output=True, text=True, env=env,
        timeout=900,
    )  # fmt: skip


def test_compare_lists_the_structures_of_the_sharded_scan():
    done = run("compare", MODEL.spec, "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    rows = json.loads(done.stdout)["rows"]
    built = [r["structure"]["spec"] for r in rows if r["structure"] and not r["refused"]]
    assert {"nested(2)", "nested(4)", SPLIT} <= set(built), built
    # a structure JAX refuses (everything saved by the complex rope) is a row with why
    refused = [r for r in rows if r["structure"] and r["refused"]]
    assert refused and all(MODEL.refused in r["error"] for r in refused)


def test_suggest_answers_from_the_structures_of_the_sharded_scan():
    budget = hand.hand_peak(fsdp.make_loss(), fsdp.example_args(jax.devices("cpu"))) - 1
    done = run("suggest", MODEL.spec, "--budget", str(budget), "--compiled", "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    answer = json.loads(done.stdout)
    assert answer["fits"] and answer["best"]["compiled"]["peak_bytes"] <= budget
    assert not answer["best"]["refused"]


def test_a_structure_that_cannot_be_built_is_a_row_with_why_and_the_search_goes_on(monkeypatch):
    # Stands for a scan whose inputs a rebuilt loop cannot take (JAX's types
    # varying over manual axes): every structure is refused with the reason.
    from remat_tui.core import jaxcompat as jc
    from remat_tui.core.search.compare import compare
    from remat_tui.core.search.suggest import pipeline as suggest_module

    why = "its inputs carry types a rebuilt loop cannot take"
    monkeypatch.setattr(jc.scans, "trace_abstract", lambda fn, invars: (None, why))
    target = the_target()
    rows = [r for r in compare(target).rows if r.config.structure is not None]
    assert rows and all(r.refused and why in r.error for r in rows)
    # suggest's exact search (forced here) answers from the rest
    monkeypatch.setattr(suggest_module, "ENUMERATE_LIMIT", 0)
    budget = compile_answer(target, Config.make()).result.peak_bytes - 1
    answer = suggest_module.suggest(target, budget=budget, compiled=True)
    assert answer.fits and answer.found.config.structure is None
    assert answer.found.compiled.peak_bytes <= budget
    assert {r.config.label() for r in rows} <= {r.config.label() for r in answer.refused}


def test_a_sites_code_keeps_its_checkpoints_prevent_cse():
    target = the_target()
    config = Config.make(sites={1: "dots_saveable"})
    tool = analyze(target, config=config)
    assert tool.python.splitlines()[1] == (
        "jax.checkpoint(decoder_layer, policy=jax.checkpoint_policies.dots_saveable, "
        "prevent_cse=False)"
    )
    pasted = hand.paste(tool.python, MODEL)
    assert "jax.lax.scan(jax.checkpoint(decoder_layer" in pasted.source
    args = target.args()
    assert hand.hand_peak(pasted.function, args) == compile_answer(target, config).result.peak_bytes
    by_hand = fsdp.make_loss(CP.dots_saveable)
    assert hand.hand_peak(pasted.function, args) == hand.hand_peak(by_hand, args)
