"""Contract 14 in the jaxprs: each residual's rule and readers, against JAX.

The rule: for every residual a policy saved, the equation it judged is one
JAX itself asked the policy about while tracing (a recording policy says
so), and a hand-written policy function, called on that equation's
primitive and params, reports the rule the story names. The readers: the
backward equations that use the residual's variable, found here by a walk
of the backward jaxpr of our own, each on the pane line the story gives."""

import jax
import pytest
from conftest import example, jax_saved_residuals
from jax.ad_checkpoint import checkpoint_name

import remat_tui
from remat_tui.core import jaxcompat as jc
from remat_tui.core import stories
from remat_tui.core.setup import loading, policies
from remat_tui.core.setup.config import Config
from remat_tui.core.trace.analysis import full_view
from remat_tui.core.trace.configured import target_dir
from remat_tui.core.trace.origins import Origins
from remat_tui.core.trace.story import backward_inputs
from remat_tui.core.trace.traced import trace_config

# ---- hand-written policies: the rule each one reports for an equation ---------------


def _dot_batch_dims(params):
    (_, _), (lhs, rhs) = params["dimension_numbers"]
    return bool(lhs or rhs)


def hand_everything(prim, *_, **__):
    return "everything"


def hand_dots(prim, *_, **__):
    return {"dot_general": "dot", "conv_general_dilated": "conv"}.get(prim.name)


def hand_dots_no_batch(prim, *_, **params):
    if prim.name == "dot_general" and not _dot_batch_dims(params):
        return "dot_no_batch_dims"
    return None


def hand_names(saved=(), offloaded=()):
    def policy(prim, *_, **params):
        if prim.name != "name":
            return None
        if params["name"] in saved:
            return "name_saved"
        return "name_offloaded" if params["name"] in offloaded else None

    return policy


def hand_both(first, second):
    return lambda *a, **p: first(*a, **p) or second(*a, **p)


OFFLOADING = (
    "save_and_offload_only_these_names(names_which_can_be_saved=['a'], "
    "names_which_can_be_offloaded=['b'])"
)
OUTER = {
    "everything_saveable": hand_everything,
    "dots_saveable": hand_dots,
    "dots_with_no_batch_dims_saveable": hand_dots_no_batch,
    "save_only_these_names('a', 'c')": hand_names(saved=("a", "c")),
    OFFLOADING: hand_names(saved=("a",), offloaded=("b",)),
    "save_from_both_policies(dots_with_no_batch_dims_saveable, save_only_these_names('b'))": (
        hand_both(hand_dots_no_batch, hand_names(saved=("b",)))
    ),
}


def _params_key(params) -> str:
    return repr(sorted((k, repr(v)) for k, v in params.items()))


def _recorded_calls(target, spec_text):
    """(primitive name, params) of every equation JAX asks the policy about
    when it differentiates the target under it, with the policy's answer."""
    spec = policies.parse(spec_text, target.policies)
    policy = policies.build(spec, target.policies)
    calls = set()

    def recording(prim, *avals, **params):
        answer = policy(prim, *avals, **params)
        calls.add((prim.name, _params_key(params), repr(answer)))
        return answer

    args, kwargs = loading.resolve_arguments(target)
    checkpointed = jax.checkpoint(lambda *a: target.fn(*a, **kwargs), policy=recording)
    jax.make_jaxpr(lambda *a: jax.vjp(checkpointed, *a))(*args)
    return calls


def _judged(target, config):
    """The analysis, and for each residual the equation its policy judged."""
    t = trace_config(target, config)
    origins = Origins(target_dir(target), t.sites)
    return full_view(t), [origins.judged(t.forward, fr.var) for fr in t.found]


@pytest.mark.parametrize("spec", list(OUTER))
@pytest.mark.parametrize("name", ["f", "loss"])
def test_every_rule_is_the_one_a_hand_written_policy_reports(notebook_targets, name, spec):
    target = notebook_targets[name]
    hand = OUTER[spec]
    config = Config.make(spec, declared=target.policies)
    analysis, judged = _judged(target, config)
    asked = {(p, k) for p, k, _ in _recorded_calls(target, spec)}
    saved_by_policy = 0
    for r, eqn in zip(analysis.residuals, judged, strict=True):
        rule = r.story.rule
        if r.kind == "argument":
            assert rule.kind == stories.ARGUMENT
            continue
        assert rule.kind == stories.POLICY, (r.text, rule)
        assert rule.site is None and rule.policy == config.spec.canonical
        # JAX asked the policy about this very equation (remat3 asks about a
        # checkpoint_name as name_p; it applies everything_saveable as plain
        # autodiff, asking nothing) ...
        primitive, avals, params = jc.policy_question(eqn)
        if not (jc.remat3_enabled() and spec == "everything_saveable"):
            assert (primitive.name, _params_key(params)) in asked
        # ... and the hand-written policy reports the rule the story names.
        assert rule.matched == hand(primitive, *avals, **params), r.text
        assert rule.decision == ("offload" if r.memory == "host" else "save")
        saved_by_policy += 1
    names_only = spec.startswith(("save_only", "save_and_offload"))
    assert saved_by_policy or (name == "f" and names_only)  # f names nothing


def test_sites_rules_are_their_own_policies_and_outputs_say_so(notebook_targets):
    """f4: site 1's save_only_these_names('a') saves 'a'; f2: three
    jax.checkpoint(g) sites with nothing_saveable, each output (read by the
    next site, under no checkpoint) saved as an output, with its own site."""
    a, judged = _judged(notebook_targets["f4"], Config.make())
    (named,) = [(r, e) for r, e in zip(a.residuals, judged, strict=True) if r.kind == "named"]
    r, eqn = named
    assert r.story.rule.site == 1 and r.story.rule.kind == stories.POLICY
    primitive, avals, params = jc.policy_question(eqn)
    assert r.story.rule.matched == hand_names(saved=("a",))(primitive, *avals, **params)

    a = remat_tui.analyze(notebook_targets["f2"])
    outputs = [r for r in a.residuals if r.kind != "argument"]
    assert [r.story.rule.kind for r in outputs] == [stories.REGION_OUTPUT] * 2
    assert [r.story.rule.site for r in outputs] == [1, 2]  # the site that made each
    assert all(r.story.rule.decision == "recompute" for r in outputs)

    # Site 2 removed: its sin is under no checkpoint now.
    a = remat_tui.analyze(notebook_targets["f2"], sites={2: "as_written"})
    kinds = {r.text.split(" from ")[0]: r.story.rule.kind for r in a.residuals}
    assert stories.NO_CHECKPOINT in kinds.values() and stories.REGION_OUTPUT in kinds.values()


def _shared_body(looped: bool):
    """jax.checkpoint(layer) at two places (or three, from one line in a
    loop) with the same argument types: JAX traces `layer` once, so every
    site's body holds the first call's frames. The first site saves 'a' by
    its policy; the second (unless looped) is JAX's default."""
    jnp = jax.numpy

    def layer(w, x):
        return checkpoint_name(jnp.sin(x @ w), "a")

    names = jax.checkpoint_policies.save_only_these_names("a")

    def loss(ws, x):
        if looped:
            for w in ws:
                x = jax.checkpoint(layer, policy=names)(w, x)
        else:
            x = jax.checkpoint(layer, policy=names)(ws[0], x)
            x = jax.checkpoint(layer)(ws[1], x)
        return jnp.sum(x**2)

    f32 = jnp.float32
    args = ([jax.ShapeDtypeStruct((8, 8), f32)] * 3, jax.ShapeDtypeStruct((4, 8), f32))
    return remat_tui.registry.Target(fn=loss, name="loss", args=args)


@pytest.mark.parametrize("looped", [False, True])
def test_sites_sharing_one_traced_body_are_told_apart_by_place(looped):
    """Each saved 'a' is the output of one site, in program order (the last
    site's is read by the loss, which saves its own value): its rule is that
    site's policy, as the hand-written policy reports, and its origin is
    that site. Frames alone named the last site for every one (or the
    second's nothing_saveable: 'an output of site 2')."""
    target = _shared_body(looped)
    a, judged = _judged(target, Config.make())
    named = [(r, e) for r, e in zip(a.residuals, judged, strict=True) if r.kind == "named"]
    assert [r.text for r, _ in named] == [
        t
        for t in jax_saved_residuals(target.fn, "as_written", *loading.resolve_arguments(target))
        if " named 'a' " in t
    ]
    assert [r.story.rule.site for r, _ in named] == list(range(1, len(named) + 1))
    assert [r.origin.site for r, _ in named] == list(range(1, len(named) + 1))
    for r, eqn in named:
        primitive, avals, params = jc.policy_question(eqn)
        assert r.story.rule.kind == stories.POLICY
        assert r.story.rule.matched == hand_names(saved=("a",))(primitive, *avals, **params)


def test_the_outer_policy_decides_inside_the_sites_it_wraps(notebook_targets):
    """Under an outer policy JAX judges the sites' bodies by it, not by theirs:
    f2's sites save nothing of their own, yet everything_saveable saves there."""
    a = remat_tui.analyze(notebook_targets["f2"], policy="everything_saveable")
    inside = [r for r in a.residuals if r.kind != "argument"]
    assert inside and all(
        r.story.rule.site is None and r.story.rule.matched == "everything" for r in inside
    )


def test_a_flax_models_rules_are_its_sites_policy():
    """examples/flax_linen.py: nn.remat(Block, policy=save_only_these_names('qkv'))
    under nn.scan; every residual it saves is the name 'qkv', by that rule;
    under an outer dots_saveable every saved dot is a dot_general."""
    target = loading.load_targets(example("flax_linen.py"))["loss"]
    a, judged = _judged(target, Config.make())
    by_site = [(r, e) for r, e in zip(a.residuals, judged, strict=True) if r.story.rule.site]
    assert by_site
    for r, eqn in by_site:
        primitive, avals, params = jc.policy_question(eqn)
        assert r.story.rule.matched == hand_names(saved=("qkv",))(primitive, *avals, **params)
    a, judged = _judged(target, Config.make("dots_saveable"))
    dots = [(r, e) for r, e in zip(a.residuals, judged, strict=True) if r.kind != "argument"]
    assert any(r.story.rule.matched == "dot" for r, _ in dots)
    for r, eqn in dots:
        if r.story.rule.kind == stories.POLICY:
            primitive, avals, params = jc.policy_question(eqn)
            assert r.story.rule.matched == hand_dots(primitive, *avals, **params)


def _reading(jaxpr, var) -> list:
    """The leaf equations of `jaxpr` using `var`, into the bodies of calls
    whose inputs are the equation's own, one to one."""
    out = []
    for eqn in jaxpr.eqns:
        if not any(v is var for v in eqn.invars):
            continue
        inner = [
            j
            for p in eqn.params.values()
            for j in (p if isinstance(p, tuple) else (p,))
            if hasattr(j, "eqns") or hasattr(getattr(j, "jaxpr", None), "eqns")
        ]
        if not inner:
            out.append(eqn)
            continue
        for j in inner:
            body = j if hasattr(j, "eqns") else j.jaxpr
            if len(body.invars) == len(eqn.invars):
                for outer, mine in zip(eqn.invars, body.invars, strict=True):
                    if outer is var:
                        out += _reading(body, mine)
    return out


@pytest.mark.parametrize("name,spec", [("loss", "dots_saveable"), ("f2", "as_written")])
def test_every_residuals_readers_are_the_backward_equations_using_it(notebook_targets, name, spec):
    target = notebook_targets[name]
    config = Config.make(spec)
    t = trace_config(target, config)
    bwd = t.backward()
    a = full_view(t)
    for fr, r in zip(t.found, a.residuals, strict=True):
        want = [e for v in backward_inputs(fr, bwd, t.backward_positions) for e in _reading(bwd, v)]
        readers = r.story.readers
        assert sorted(x.primitive for x in readers) == sorted(e.primitive.name for e in want)
        for reader in readers:  # each on its own line of the backward pane
            assert reader.primitive in a.backward.lines[reader.line]
        assert {x.line for x in readers} <= set(r.backward_lines)


def test_a_residual_no_backward_equation_reads_says_so_in_plain_words():
    """take_along_axis saves its indices, which no backward equation reads
    (by the walk of JAX's backward jaxpr above): the story says so in plain
    words ("the backward pass reads it not" read as a typo)."""
    import jax.numpy as jnp

    from remat_tui.core.trace.configured import as_target
    from remat_tui.report.story import reader_words

    def loss(x, labels):
        logp = jax.nn.log_softmax(x)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    target = as_target(loss, (jnp.ones((4, 8)), jnp.zeros((4,), jnp.int32)), None)
    t = trace_config(target, Config.make("as_written"))
    bwd = t.backward()
    a = full_view(t)
    unread = [
        r
        for fr, r in zip(t.found, a.residuals, strict=True)
        if not [e for v in backward_inputs(fr, bwd, t.backward_positions) for e in _reading(bwd, v)]
    ]
    assert unread  # JAX saves something its backward pass never reads
    for r in unread:
        assert reader_words(r) == (
            "nothing in the backward jaxpr (JAX saves it, but the backward pass does not read it)"
        )
