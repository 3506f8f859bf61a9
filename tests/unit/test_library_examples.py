"""The Flax NNX, Flax Linen and Equinox examples against JAX's oracle.

For every library example target and every built-in policy (plus name and
offload policies over the names the models define), our residual list equals
what print_saved_residuals prints now. And each example's `make_loss(policy)`
factory is honest: analysed as written, it matches print_saved_residuals of
the factory's own output. Needs the `examples` extra (flax, equinox, optax).
"""

import pytest

pytest.importorskip("flax")
pytest.importorskip("equinox")
pytest.importorskip("optax")

import functools  # noqa: E402
import re  # noqa: E402

import jax  # noqa: E402
from conftest import example, jax_saved_residuals  # noqa: E402

import remat_tui  # noqa: E402
from remat_tui.core.setup import loading, policies  # noqa: E402

FILES = ("flax_nnx.py", "flax_linen.py", "equinox_transformer.py")
# Every example tags qkv, attention_out and mlp_hidden.
NAME_SPECS = (
    "save_only_these_names('qkv', 'mlp_hidden')",
    "save_any_names_but_these('mlp_hidden')",
    "save_and_offload_only_these_names(names_which_can_be_saved=['qkv'], "
    "names_which_can_be_offloaded=['attention_out', 'mlp_hidden'])",
)
CP = jax.checkpoint_policies
# Block policies given to make_loss by hand, as a user would write them.
FACTORY_POLICIES = {
    "nothing_saveable": CP.nothing_saveable,
    "save_only_these_names('qkv')": CP.save_only_these_names("qkv"),
    "save_and_offload_only_these_names": CP.save_and_offload_only_these_names(
        names_which_can_be_saved=["attention_out"],
        names_which_can_be_offloaded=["mlp_hidden"],
        offload_src="device",
        offload_dst="pinned_host",
    ),
}


@functools.cache
def load(file):
    (target,) = loading.load_targets(example(file)).values()
    return target, loading.resolve_arguments(target)


def texts(analysis):
    return [r.text for r in analysis.residuals]


@pytest.mark.parametrize("spec", [*policies.builtin_specs(), *NAME_SPECS])
@pytest.mark.parametrize("file", FILES)
def test_residuals_match_jax(file, spec):
    target, (args, kwargs) = load(file)
    want = jax_saved_residuals(target.fn, spec, args, kwargs, target.policies)
    analysis = remat_tui.analyze(target, policy=spec)
    assert texts(analysis) == want
    assert analysis.totals.count == len(want)


@pytest.mark.parametrize("label", FACTORY_POLICIES)
@pytest.mark.parametrize("file", FILES)
def test_make_loss_is_honest(file, label):
    target, (args, kwargs) = load(file)
    fn = target.fn.__globals__["make_loss"](FACTORY_POLICIES[label])
    want = jax_saved_residuals(fn, policies.AS_WRITTEN, args, kwargs)
    assert texts(remat_tui.analyze(fn, args=args, kwargs=kwargs)) == want


@pytest.mark.parametrize("file", FILES)
def test_registered_target_is_make_loss_of_default_policy(file):
    """The target is the factory's output for DEFAULT_POLICY, so site overrides
    can be compared with make_loss(P) for the same source."""
    target, (args, kwargs) = load(file)
    module = target.fn.__globals__
    fn = module["make_loss"](module["DEFAULT_POLICY"])
    assert texts(remat_tui.analyze(fn, args=args, kwargs=kwargs)) == texts(
        remat_tui.analyze(target)
    )


@pytest.mark.parametrize("file", FILES)
def test_names_are_defined(file):
    """Each model tags exactly the checkpoint_names its NAMES lists."""
    target, (args, kwargs) = load(file)
    jaxpr = str(jax.make_jaxpr(target.fn)(*args, **kwargs))
    tagged = set(re.findall(r"\bname\[name=(\w+)\]", jaxpr))
    assert tagged == set(target.fn.__globals__["NAMES"])


def module_of(file):
    target, _ = load(file)
    return target.fn.__module__ and __import__("sys").modules[target.fn.__module__]


@pytest.mark.parametrize("spec", [*policies.builtin_specs(), *NAME_SPECS])
@pytest.mark.parametrize("file", FILES)
def test_site_override_matches_the_factory_edited_by_hand(file, spec):
    """Overriding the block's checkpoint equals make_loss(P): the same source with
    the policy changed by hand (as_written: make_loss without a checkpoint)."""
    target, (args, kwargs) = load(file)
    (site,) = remat_tui.analyze(target).sites
    got = remat_tui.analyze(target, sites={site.id: spec})
    parsed = policies.parse(spec)
    module = module_of(file)
    hand = module.make_loss(
        module.NO_CHECKPOINT if parsed.kind == policies.AS_WRITTEN else policies.build(parsed)
    )
    assert texts(got) == jax_saved_residuals(hand, "as_written", args, kwargs)


@pytest.mark.parametrize("file", FILES)
def test_sites_and_origins_point_at_the_example(file):
    target, _ = load(file)
    analysis = remat_tui.analyze(target, sites={1: "save_only_these_names('qkv')"})
    (site,) = analysis.sites
    assert site.trip_count == 2 and site.source.file == example(file)
    assert "<locals>" in site.function or site.function[0].isalpha()
    qkv = [r for r in analysis.residuals if r.origin.name == "qkv"]
    assert qkv and all(r.origin.trip_count == 2 for r in qkv)
    computed = [r.origin.source for r in analysis.residuals if r.kind != "argument"]
    assert computed and all(s is not None and s.file == example(file) for s in computed)


def jitted(file, fn):
    """The loss under the library's own jit, as training code wraps it."""
    if file == "flax_nnx.py":
        from flax import nnx

        return nnx.jit(fn)
    if file == "equinox_transformer.py":
        import equinox as eqx

        return eqx.filter_jit(fn)
    return jax.jit(fn)


@pytest.mark.parametrize("file", FILES)
def test_library_jit_keeps_the_users_lines(file):
    """nnx.jit / eqx.filter_jit put the model in a jit body: JAX's list is kept,
    the site is still found, and origins still point at the example."""
    target, (args, kwargs) = load(file)
    module = module_of(file)
    fn = jitted(file, module.make_loss(CP.save_only_these_names("qkv")))
    got = remat_tui.analyze(fn, args=args, kwargs=kwargs, sites={1: "nothing_saveable"})
    hand = jitted(file, module.make_loss(CP.nothing_saveable))
    assert texts(got) == jax_saved_residuals(hand, "as_written", args, kwargs)
    (site,) = got.sites
    assert site.source.file == example(file) and site.trip_count == 2
    computed = [r.origin.source for r in got.residuals if r.kind != "argument"]
    assert computed and all(s is not None and s.file == example(file) for s in computed)
