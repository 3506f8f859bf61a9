"""Issue 43, "explain a difference", at a finer grain: a names policy at a
site is one decision per name it treats otherwise than the code as written,
a split structure's two parts are two decisions, and the culprit's line
names only the calls back to Python its recomputation runs again
(`xla.verify.decisions`, `xla.verify.program_names`, `xla.verify.bisect`). The
oracle: the gradients by hand with `jax.value_and_grad` under hand-written
policies, at test time."""

import os

import jax
import numpy as np
from conftest import ROOT

import remat_tui
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.policies import AS_WRITTEN, PolicySpec, as_spec
from remat_tui.core.xla.verify.bisect import verify_explained
from remat_tui.core.xla.verify.decisions import (
    FIRST,
    NAME,
    OFFLOAD,
    OTHERS,
    RECOMPUTE,
    REST,
    SAVE,
    SITE,
    STRUCTURE,
    SiteNames,
    configure,
    decisions,
)
from remat_tui.core.xla.verify.program_names import program_callbacks

SITE_MODEL = os.path.join(ROOT, "tests", "models", "eight_names_site.py")


def site_model():
    target = remat_tui.load_targets(SITE_MODEL)["loss"]
    return target, target.fn.__globals__


def reset(module):
    module["draws"][0] = 0
    module["shifts"][0] = 0


def by_hand(module, policy, args):
    """{leaf path: value} of the loss and its gradients with the block under
    `policy`, the draws' counts reset first."""
    reset(module)
    value, grads = jax.jit(jax.value_and_grad(module["loss_under"](policy)))(*args)
    reset(module)
    return {"loss": np.asarray(value), **{
        f"params{jax.tree_util.keystr(path)}": np.asarray(g)
        for path, g in jax.tree_util.tree_flatten_with_path(grads)[0]
    }}  # fmt: skip


def moved(got, want, tolerance):
    return {
        path for path in want
        if np.max(np.abs(got[path].astype(np.float64) - want[path])) > tolerance[path]
    }  # fmt: skip


def line_of(text):
    with open(SITE_MODEL) as fh:
        return next(i for i, t in enumerate(fh.read().splitlines(), 1) if text in t)


def test_a_names_policy_at_a_site_is_bisected_to_the_one_name_and_its_one_callback():
    target, module = site_model()
    names, noisy = module["NAMES"], module["NOISY"]
    reset(module)
    v = verify_explained(target, Config.make(sites={"block": "save_only_these_names()"}))
    assert v.verdict == "differ"
    # One decision per name the site's policy recomputes (as written there: all
    # eight saved, a names policy: nothing else differs, no rest).
    assert [(d.kind, d.key, d.action, d.site) for d in v.decisions] == [
        (NAME, name, RECOMPUTE, "block") for name in names
    ]
    assert v.culprit is not None
    assert [(d.kind, d.key, d.site) for d in v.culprit.decisions] == [(NAME, noisy, "block")]

    # JAX says the same: the written policy with that name removed moves the
    # gradients past verify's tolerance; with it kept (every other name
    # recomputed), nothing moves.
    args = target.args()
    tolerance = {leaf.path: leaf.tolerance for leaf in v.leaves}
    want = by_hand(module, module["WRITTEN"], args)
    save = jax.checkpoint_policies.save_only_these_names
    removed = by_hand(module, save(*[n for n in names if n != noisy]), args)
    kept = by_hand(module, save(noisy), args)
    assert moved(removed, want, tolerance)
    assert not moved(kept, want, tolerance)
    assert v.culprit.leaf in moved(removed, want, tolerance)

    # The program calls back to Python twice; the verification and the
    # culprit's line name the one whose recomputation they cause, not the one
    # after the block.
    draw, shift = line_of("jax.pure_callback(_draw"), line_of("jax.pure_callback(_shift")
    assert program_callbacks(target, jax.devices("cpu")[0]) == (
        f"pure_callback at eight_names_site.py:{draw}",
        f"pure_callback at eight_names_site.py:{shift}",
    )
    assert v.callbacks == (f"pure_callback at eight_names_site.py:{draw}",)
    assert v.culprit.callbacks == (f"pure_callback at eight_names_site.py:{draw}",)
    made = line_of("checkpoint_name(z, name)")
    assert v.culprit.line.startswith(
        f"recomputing {noisy!r} (eight_names_site.py:{made}) at site block changes "
    )
    assert v.culprit.line.endswith(
        f": the pure_callback at eight_names_site.py:{draw} runs again in the backward pass"
    )
    assert f":{shift}" not in v.culprit.line


def test_site_decisions_are_against_the_policy_written_there():
    names = {"a": "m.py:1", "b": "m.py:2", "c": "m.py:3"}
    written = as_spec("save_only_these_names('a', 'b')")
    override = (
        "save_and_offload_only_these_names(names_which_can_be_saved=['c'], "
        "names_which_can_be_offloaded=['b'], offload_src='device', offload_dst='pinned_host')"
    )
    config = Config.make(sites={1: override, "f": "save_only_these_names('a')"})
    sites = {1: SiteNames(names, written), "f": SiteNames(names, None)}
    found = decisions(config, {}, sites)
    assert [(d.kind, d.site, d.key, d.action, d.written) for d in found] == [
        # site 1, against its names policy: 'a' recomputed, 'b' offloaded, 'c' saved
        (NAME, 1, "a", RECOMPUTE, SAVE), (NAME, 1, "b", OFFLOAD, SAVE),
        (NAME, 1, "c", SAVE, RECOMPUTE),
        # site f, written otherwise: against every name saved, and the rest
        (REST, "f", None, None, None), (NAME, "f", "b", RECOMPUTE, SAVE),
        (NAME, "f", "c", RECOMPUTE, SAVE),
    ]  # fmt: skip
    assert found[2].what == "saving 'c' (m.py:3) at site 1"
    assert configure(config, found, found) == config
    assert configure(config, found, []) == Config()
    by = {(d.site, d.key): d for d in found}
    # One name chosen: every other name at that site as written there.
    assert configure(config, found, [by[(1, "b")]]) == Config.make(
        sites={1: "save_and_offload_only_these_names(names_which_can_be_saved=['a'], "
               "names_which_can_be_offloaded=['b'], offload_src='device', "
               "offload_dst='pinned_host')"}
    )  # fmt: skip
    assert configure(config, found, [by[("f", None)]]) == Config.make(
        sites={"f": "save_only_these_names('a', 'b', 'c')"}
    )
    assert configure(config, found, [by[("f", "c")]]) == Config.make(
        sites={"f": "save_only_these_names('a', 'b')"}
    )
    # Without what the site makes, the site's policy is one decision, as before.
    assert [d.kind for d in decisions(config, {})] == [SITE, SITE]


def test_a_split_structure_is_two_decisions_and_one_part_is_a_configuration():
    config = Config.make(structure="split(2, nothing_saveable, dots_saveable)")
    found = decisions(config, {})
    assert [(d.kind, d.key) for d in found] == [(STRUCTURE, FIRST), (STRUCTURE, OTHERS)]
    assert configure(config, found, found) == config
    assert configure(config, found, []) == Config()
    assert configure(config, found, [found[0]]) == Config.make(
        structure="split(2, nothing_saveable, as_written)"
    )
    assert configure(config, found, [found[1]]).structure.parts == (
        PolicySpec(AS_WRITTEN), as_spec("dots_saveable"),
    )  # fmt: skip
    # A split with a part as written, and a nested structure: one decision.
    for one in ("split(2, nothing_saveable, as_written)", "nested(2)"):
        assert [(d.kind, d.key) for d in decisions(Config.make(structure=one), {})] == [
            (STRUCTURE, None)
        ]


DEEP = os.path.join(ROOT, "tests", "models", "stateful_noise_deep.py")


def test_the_bisection_separates_a_split_s_parts():
    """A scan of noisy layers checkpointed as written under everything_saveable:
    split(2, everything_saveable, nothing_saveable) recomputes the noise of the
    layers after the second only, and the bisection says that part."""
    target = remat_tui.load_targets(DEEP)["loss"]
    module = target.fn.__globals__
    module["draws"][0] = 0
    v = verify_explained(
        target, Config.make(structure="split(2, everything_saveable, nothing_saveable)")
    )
    assert v.verdict == "differ"
    assert [(d.kind, d.key) for d in v.decisions] == [(STRUCTURE, FIRST), (STRUCTURE, OTHERS)]
    assert v.culprit is not None
    assert [(d.kind, d.key) for d in v.culprit.decisions] == [(STRUCTURE, OTHERS)]
    assert v.culprit.line.startswith(
        "structure split(2, everything_saveable, nothing_saveable): its other layers under "
        "nothing_saveable changes "
    )

    # JAX, the split written by hand as two scans: the other layers under
    # nothing_saveable move the gradients past verify's tolerance; the first
    # two under everything_saveable, the rest as written, move nothing.
    def split_loss(first, rest):
        def loss(params, x):
            params = module["_step_ends"](params)
            layers = params["layers"]
            h, _ = jax.lax.scan(jax.checkpoint(module["layer"], policy=first), x, layers[:2])
            h, _ = jax.lax.scan(jax.checkpoint(module["layer"], policy=rest), h, layers[2:])
            return jax.numpy.mean(h**2)

        return loss

    def grads(loss):
        module["draws"][0] = 0
        value, g = jax.jit(jax.value_and_grad(loss))(*target.args())
        module["draws"][0] = 0
        return {"loss": np.asarray(value), "params['layers']": np.asarray(g["layers"])}

    tolerance = {leaf.path: leaf.tolerance for leaf in v.leaves}
    policies = jax.checkpoint_policies
    written = grads(module["loss_under"](policies.everything_saveable))
    first_only = grads(split_loss(policies.everything_saveable, policies.everything_saveable))
    rest_only = grads(split_loss(policies.everything_saveable, policies.nothing_saveable))
    assert not moved(first_only, written, tolerance)
    assert v.culprit.leaf in moved(rest_only, written, tolerance)


def test_the_command_names_the_one_name_at_the_site(capsys):
    from remat_tui import cli

    _, module = site_model()
    reset(module)
    status = cli.main(["verify", SITE_MODEL, "--site", "block=save_only_these_names()"])
    out, err = capsys.readouterr()
    assert status == 1
    culprit = [line for line in out.splitlines() if line.startswith("  culprit: ")]
    draw = line_of("jax.pure_callback(_draw")
    assert len(culprit) == 1 and culprit[0].startswith(
        f"  culprit: recomputing {module['NOISY']!r} ("
    )
    assert f"the pure_callback at eight_names_site.py:{draw} runs again" in culprit[0]
    assert f"eight_names_site.py:{line_of('jax.pure_callback(_shift')}" not in out
    assert "Traceback" not in err
