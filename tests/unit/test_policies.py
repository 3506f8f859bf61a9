"""Policy specs: parsing, one canonical spelling, JAX policy objects, errors."""

import jax
import pytest

from remat_tui.core.setup import policies
from remat_tui.errors import RematError

CP = jax.checkpoint_policies


@pytest.mark.parametrize(
    "text,canonical",
    [
        ("as_written", "as_written"),
        ("everything_saveable", "everything_saveable"),
        ("checkpoint_dots", "dots_saveable"),
        ("checkpoint_dots_with_no_batch_dims", "dots_with_no_batch_dims_saveable"),
        ("jax.checkpoint_policies.nothing_saveable", "nothing_saveable"),
        ('save_only_these_names("b", "a", "b")', "save_only_these_names('a', 'b')"),
        ("save_any_names_but_these('x')", "save_any_names_but_these('x')"),
        (
            "offload_dot_with_no_batch_dims(offload_src='device', offload_dst='pinned_host')",
            "offload_dot_with_no_batch_dims('device', 'pinned_host')",
        ),
        (
            "save_and_offload_only_these_names(names_which_can_be_offloaded=('b',), "
            "names_which_can_be_saved=['a'])",
            "save_and_offload_only_these_names(names_which_can_be_saved=['a'], "
            "names_which_can_be_offloaded=['b'], offload_src='device', offload_dst='pinned_host')",
        ),
        (
            "save_from_both_policies(checkpoint_dots, save_only_these_names('a'))",
            "save_from_both_policies(dots_saveable, save_only_these_names('a'))",
        ),
    ],
)
def test_canonical_spelling_round_trips(text, canonical):
    spec = policies.parse(text)
    assert spec.canonical == canonical
    assert policies.parse(spec.canonical) == spec


def test_every_jax_policy_attribute_is_accepted():
    for attr in vars(CP):
        if attr in policies.SIMPLE:
            assert policies.build(policies.parse(attr)) is getattr(CP, attr)
        else:
            assert attr in policies.CALLABLE_FACTORIES, f"jax policy {attr} is not supported"


def test_built_name_policies_behave_like_jax():
    from remat_tui.core.jaxcompat.remat import name_p  # the primitive the policies test for

    built = policies.build(policies.parse("save_only_these_names('a')"))
    assert built(name_p, name="a") and not built(name_p, name="b")


def test_checkpoint_policy_is_the_policy_a_spec_sets_and_as_written_sets_none():
    assert policies.checkpoint_policy(policies.parse("dots_saveable")) is CP.dots_saveable
    with pytest.raises(ValueError, match="as_written sets no policy"):
        policies.checkpoint_policy(policies.parse("as_written"))


def test_python_snippet_is_the_code_a_user_pastes(mlp_target):
    spec = policies.parse("save_only_these_names('layer1')")
    snippet = spec.python("loss")
    assert snippet == (
        "jax.checkpoint(loss, policy=jax.checkpoint_policies.save_only_these_names('layer1'))"
    )
    namespace = {"jax": jax, "loss": mlp_target.fn}
    checkpointed = eval(snippet, namespace)  # the snippet must really run
    assert callable(checkpointed)


def test_declared_policies_resolve_by_name(notebook_targets):
    loss = notebook_targets["loss"]
    spec = policies.parse("save_a_and_dots", loss.policies)
    assert spec.declared and spec.canonical == "save_a_and_dots"
    assert policies.build(spec, loss.policies) is loss.policies["save_a_and_dots"]
    assert spec.python("loss") == "jax.checkpoint(loss, policy=save_a_and_dots)"


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("", "empty policy spec"),
        ("nope", "unknown policy 'nope'"),
        ("dots_saveable(", "was never closed"),
        ("dots_saveable()", "takes no arguments"),
        ("save_only_these_names", "needs arguments"),
        ("save_only_these_names(1)", "column 23"),
        ("save_only_these_names(x='a')", "positional arguments only"),
        ("save_and_offload_only_these_names(['a'])", "keyword arguments only"),
        (
            "save_and_offload_only_these_names(names_which_can_be_saved=['a'], "
            "names_which_can_be_offloaded=['a'])",
            "both saved and offloaded",
        ),
        ("offload_dot_with_no_batch_dims('device', 'gpu_mem')", "offload_dst 'gpu_mem'"),
        ("offload_dot_with_no_batch_dims('pinned_host', 'device')", "offload_src 'pinned_host'"),
        ("save_from_both_policies(dots_saveable)", "exactly two policies"),
        ("__import__('os')", "unknown policy '__import__'"),
        ("os.system('x')", "expected a policy name or call"),
    ],
)
def test_bad_specs_say_what_was_expected_and_where(text, fragment):
    with pytest.raises(RematError) as err:
        policies.parse(text)
    assert fragment in err.value.message


def test_warnings():
    spec = policies.parse("save_anything_except_these_names('a')")
    assert any("saves everything" in w for w in spec.warnings(set()))
    spec = policies.parse("save_only_these_names('a', 'zz')")
    notes = spec.warnings({"a", "b"})
    assert len(notes) == 1 and "'zz'" in notes[0] and "'a'" not in notes[0].split("(")[0]
    assert policies.parse("save_only_these_names('a')").warnings({"a"}) == []


def test_names_policy_composes_save_and_offload():
    assert policies.names_policy(["b", "a"], []).canonical == "save_only_these_names('a', 'b')"
    both = policies.names_policy(["a"], ["c"])
    assert both.kind == policies.OFFLOAD_NAMES and both.offloaded == ("c",)


@pytest.mark.parametrize(
    "text,names,new,want",
    [
        # the names half of a save_from_both_policies is read and replaced, the
        # other half kept, in its place, however deep
        (
            "save_from_both_policies(dots_saveable, save_only_these_names('a'))",
            "save_only_these_names('a')",
            "save_only_these_names('a', 'b')",
            "save_from_both_policies(dots_saveable, save_only_these_names('a', 'b'))",
        ),
        (
            "save_from_both_policies(save_only_these_names(), everything_saveable)",
            "save_only_these_names()",
            "save_only_these_names('b')",
            "save_from_both_policies(save_only_these_names('b'), everything_saveable)",
        ),
        (
            "save_from_both_policies(save_from_both_policies(dots_saveable, "
            "save_only_these_names('a')), nothing_saveable)",
            "save_only_these_names('a')",
            "save_only_these_names()",
            "save_from_both_policies(save_from_both_policies(dots_saveable, "
            "save_only_these_names()), nothing_saveable)",
        ),
        # both halves by name: one names policy of them all
        (
            "save_from_both_policies(save_only_these_names('a'), save_only_these_names('b'))",
            "save_only_these_names('a', 'b')",
            "save_only_these_names('b')",
            "save_only_these_names('b')",
        ),
        # a names policy (offloading or not) is its own names part
        (
            "save_and_offload_only_these_names(names_which_can_be_saved=['a'], "
            "names_which_can_be_offloaded=['c'], offload_src='device', offload_dst='pinned_host')",
            None,
            "save_only_these_names('c')",
            "save_only_these_names('c')",
        ),
        # nothing decided by name: the names policy alone
        ("dots_saveable", "", "save_only_these_names('a')", "save_only_these_names('a')"),
    ],
)
def test_the_names_part_of_a_policy_is_read_and_replaced_alone(text, names, new, want):
    spec = policies.parse(text)
    part = policies.names_part(spec)
    if names is None:
        assert part is spec
    elif names == "":
        assert part is None
    else:
        assert part is not None and part.canonical == names
    assert policies.with_names(spec, policies.parse(new)).canonical == want


@pytest.mark.parametrize(
    "text,meant",
    [
        ("dots_savable", "dots_saveable"),
        ("jax.checkpoint_policies.nothing_savable", "nothing_saveable"),
        ("save_only_these_nams('a', 'b')", "save_only_these_names('a', 'b')"),
        ("save_from_both_policies(dots_savable, save_only_these_names('a'))", None),
    ],
)
def test_a_misspelt_spec_says_what_was_probably_meant(text, meant):
    """The parser itself proposes the closest spec that parses, so the CLI, the
    API, the app and the notebook say it alike."""
    with pytest.raises(RematError) as err:
        policies.parse(text)
    meant = meant or policies.did_you_mean(text).canonical
    assert f"Did you mean {meant}?" in err.value.message
    assert policies.parse(meant).canonical == meant


def test_no_proposal_where_nothing_close_parses():
    with pytest.raises(RematError) as err:
        policies.parse("sometimes_saveable_at_random")
    assert "Did you mean" not in err.value.message


def test_the_builtins_are_the_specs_their_spellings_parse_to():
    """policies.BUILTINS, the specs every search weighs, are what parsing
    their spellings gives: a search built from them parses nothing."""
    assert [policies.parse(s.canonical) for s in policies.BUILTINS] == list(policies.BUILTINS)
    assert policies.builtin_specs() == [s.canonical for s in policies.BUILTINS]
    declared = {"mine": lambda *_, **__: True}
    assert policies.candidate_specs(declared)[-1] == policies.parse("mine", declared)


@pytest.mark.parametrize(
    ("text", "short"),
    [
        ("save_only_these_names('b', 'a')", "save a, b"),
        ("save_only_these_names()", "save no names"),
        (
            "save_and_offload_only_these_names(names_which_can_be_saved=['q'], "
            "names_which_can_be_offloaded=['h'], offload_src='device', offload_dst='pinned_host')",
            "save q · offload h",
        ),
        ("checkpoint_dots", "dots_saveable"),
        ("save_any_names_but_these('a')", "save_any_names_but_these('a')"),
    ],
)
def test_a_short_spelling_names_what_a_names_policy_saves_and_offloads(text, short):
    assert policies.parse(text).short() == short


def test_a_spec_names_the_declared_policies_it_uses():
    declared = {"mine": lambda *_, **__: True, "yours": lambda *_, **__: False}
    both = policies.parse("save_from_both_policies(mine, dots_saveable)", declared)
    assert both.declared_policies() == {"mine"}
    assert policies.parse("yours", declared).declared_policies() == {"yours"}
    assert policies.parse("nothing_saveable").declared_policies() == set()


def test_a_policy_given_as_text_or_as_a_spec_is_one_spec():
    """The API and the CLI take text or a PolicySpec: a spec passes through
    unparsed, text is parsed against the target's own policies."""
    spec = policies.parse("save_only_these_names('a')")
    assert policies.as_spec(spec) is spec
    assert policies.as_spec(" jax.checkpoint_policies.dots_saveable ") == policies.parse(
        "dots_saveable"
    )
    declared = {"mine": jax.checkpoint_policies.dots_saveable}
    assert policies.as_spec("mine", declared) == policies.parse("mine", declared)
    with pytest.raises(RematError, match="mine"):
        policies.as_spec("mine")
