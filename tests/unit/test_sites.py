"""Checkpoint sites and their overrides (Contract 5).

The oracle for an override is the same source with the site's policy changed
by hand: each model here is a factory taking its checkpoints' policies, and
`analyze(make(P0), sites={site: P})` must print what
`print_saved_residuals(make(P))` prints, argument names and lines included.
"""

import inspect

import jax
import jax.numpy as jnp
import pytest
from conftest import example, jax_saved_residuals
from jax.ad_checkpoint import checkpoint_name

import remat_tui
from remat_tui.core.setup import policies
from remat_tui.core.setup.loading import load_targets
from remat_tui.errors import RematError

SPECS = [
    *policies.builtin_specs(),
    "save_only_these_names('h')",
    "save_and_offload_only_these_names(names_which_can_be_saved=['h'], "
    "names_which_can_be_offloaded=['g'])",
]
WRITTEN = "nothing_saveable"  # what each factory's checkpoints say before an override


def ckpt(fn, spec):
    """`jax.checkpoint(fn, policy=spec)` as a user writes it; as_written: no checkpoint."""
    parsed = policies.parse(spec)
    if parsed.kind == policies.AS_WRITTEN:
        return fn
    return jax.checkpoint(fn, policy=policies.build(parsed))


def block(W, x):
    h = checkpoint_name(jnp.sin(x @ W), "h")
    g = checkpoint_name(jnp.tanh(h @ W.T), "g")
    return x + g * h


def make_scan(spec):
    blk = ckpt(block, spec)

    def loss(Ws, x):
        def step(x, W):
            return blk(W, x), None

        x, _ = jax.lax.scan(step, x, Ws)
        return jnp.sum(x**2)

    return loss


def make_nested_scan(spec):
    blk = ckpt(block, spec)

    def loss(Ws, x):
        def inner(x, W):
            return blk(W, x), None

        def outer(x, Wg):
            return jax.lax.scan(inner, x, Wg)[0], None

        return jnp.sum(jax.lax.scan(outer, x, Ws.reshape(2, 2, 4, 4))[0])

    return loss


def make_jit(spec):
    blk = ckpt(block, spec)

    @jax.jit
    def layers(Ws, x):
        for i in range(Ws.shape[0]):
            x = blk(Ws[i], x)
        return x

    def loss(Ws, x):
        return jnp.sum(jnp.cos(layers(Ws, x)))

    return loss


def make_cond(spec):
    blk = ckpt(block, spec)

    def loss(Ws, x):
        y = jax.lax.cond(jnp.sum(x) > 0, lambda x: blk(Ws[0], x), lambda x: jnp.sin(x), x)
        return jnp.sum(y * y)

    return loss


def make_two_sites(spec, second=None):
    """One function checkpointed at two calls; `second` sets the second alone."""
    first_blk = ckpt(block, spec)
    second_blk = ckpt(block, spec if second is None else second)

    def loss(Ws, x):
        return jnp.sum(second_blk(Ws[1], first_blk(Ws[0], x)))

    return loss


def make_vmap(spec):
    blk = ckpt(block, spec)

    def loss(Ws, x):
        return jnp.sum(jax.vmap(blk, in_axes=(None, 0))(Ws[0], x))

    return loss


def make_nested_checkpoints(spec, inner=WRITTEN):
    """A checkpointed function calling a checkpointed function."""
    inner_blk = ckpt(block, inner)

    def outer_fn(W, x):
        return jnp.sin(inner_blk(W, x)) @ W

    outer_blk = ckpt(outer_fn, spec)

    def loss(Ws, x):
        return jnp.sum(outer_blk(Ws[0], x))

    return loss


ARGS = (jnp.ones((4, 4, 4)) * 0.1, jnp.ones((2, 4)))
FACTORIES = [make_scan, make_nested_scan, make_jit, make_cond, make_vmap]


def texts(analysis):
    return [r.text for r in analysis.residuals]


def oracle(fn, outer="as_written"):
    return jax_saved_residuals(fn, outer, ARGS, {})


@pytest.mark.parametrize("make", FACTORIES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("spec", SPECS)
def test_override_by_function_matches_hand_edit(make, spec):
    got = remat_tui.analyze(make(WRITTEN), args=ARGS, sites={"block": spec})
    assert texts(got) == oracle(make(spec))
    assert {s.override for s in got.sites} == {policies.parse(spec).canonical}


@pytest.mark.parametrize("spec", SPECS)
def test_override_one_of_two_sites_by_id(spec):
    got = remat_tui.analyze(make_two_sites(WRITTEN), args=ARGS, sites={2: spec})
    assert texts(got) == oracle(make_two_sites(WRITTEN, second=spec))
    assert [s.override for s in got.sites] == [None, policies.parse(spec).canonical]


@pytest.mark.parametrize("spec", SPECS)
def test_override_by_name_reaches_every_site_of_it(spec):
    got = remat_tui.analyze(make_two_sites(WRITTEN), args=ARGS, sites={"block": spec})
    assert texts(got) == oracle(make_two_sites(spec))


@pytest.mark.parametrize(
    "spec", ["as_written", "everything_saveable", "save_only_these_names('h')"]
)
def test_nested_checkpoints_outer_and_inner(spec):
    fn = make_nested_checkpoints(WRITTEN)
    sites = remat_tui.analyze(fn, args=ARGS).sites
    assert [s.function for s in sites] == ["outer_fn", "block"]
    outer_id, inner_id = (s.id for s in sites)
    got = remat_tui.analyze(fn, args=ARGS, sites={outer_id: spec})
    assert texts(got) == oracle(make_nested_checkpoints(spec))
    got = remat_tui.analyze(fn, args=ARGS, sites={inner_id: spec})
    assert texts(got) == oracle(make_nested_checkpoints(WRITTEN, inner=spec))


@pytest.mark.parametrize("outer", ["dots_saveable", "save_only_these_names('g')"])
def test_site_override_combines_with_outer_policy(outer):
    spec = "save_only_these_names('h')"
    got = remat_tui.analyze(make_scan(WRITTEN), args=ARGS, policy=outer, sites={"block": spec})
    assert texts(got) == oracle(make_scan(spec), outer=outer)


def test_no_override_lists_sites_and_keeps_jaxs_list():
    fn = make_nested_scan("save_only_these_names('h')")
    got = remat_tui.analyze(fn, args=ARGS)
    assert texts(got) == oracle(fn)
    (site,) = got.sites
    assert site.function == "block"
    assert site.policy == "save_only_these_names('h')"
    assert site.trip_count == 4  # 2 outer iterations x 2 inner
    assert site.override is None
    assert site.source.file == __file__
    assert site.source.line == _line_of(make_nested_scan, "return blk(W, x), None")


@pytest.mark.parametrize(
    "spec",
    [
        "everything_saveable",
        "dots_with_no_batch_dims_saveable",
        "save_any_names_but_these('g')",
        "offload_dot_with_no_batch_dims('device', 'pinned_host')",
        "save_from_both_policies(dots_saveable, save_only_these_names('h'))",
    ],
)
def test_site_policy_is_read_back_as_a_spec(spec):
    (site,) = remat_tui.analyze(make_scan(spec), args=ARGS).sites
    assert site.policy == policies.parse(spec).canonical


def test_unnamed_policy_is_custom():
    def mine(prim, *_, **__):
        return False

    fn = make_scan("nothing_saveable")
    blk = jax.checkpoint(block, policy=mine)

    def loss(Ws, x):
        return jnp.sum(blk(Ws[0], x))

    (site,) = remat_tui.analyze(loss, args=ARGS).sites
    assert site.policy.startswith("custom:") and "mine" in site.policy
    assert fn  # the factory is unused here; the custom policy is the point


def test_functions_without_checkpoints_have_no_sites():
    got = remat_tui.analyze(make_scan("as_written"), args=ARGS)
    assert got.sites == []
    got = remat_tui.analyze(make_scan("as_written"), args=ARGS, policy="nothing_saveable")
    assert got.sites == []  # the outer policy is not a site of the user's code


def test_origins_follow_names_into_the_scan_body():
    got = remat_tui.analyze(make_scan("save_only_these_names('h')"), args=ARGS)
    named = [r for r in got.residuals if r.origin.name == "h"]
    assert named, [r.origin for r in got.residuals]
    for r in named:
        assert r.kind == "output"  # JAX's words stay: it is an output of scan
        assert "output of scan" in r.text
        assert r.origin.primitive == "sin"
        assert r.origin.trip_count == 4
        assert r.origin.per_iteration == "f32[2,4]"
        assert r.origin.source.line == _line_of(block, 'h = checkpoint_name(jnp.sin(x @ W), "h")')
        assert r.origin.site == 1


def test_names_list_counts_every_iteration():
    got = remat_tui.analyze(make_scan("save_only_these_names('h')"), args=ARGS)
    h = next(n for n in got.names if n.name == "h")
    assert h.bytes == 2 * 4 * 4  # one f32[2,4]
    assert h.total_bytes == 4 * h.bytes  # saved once per layer: 4 scan iterations


def test_snippet_is_pasted_at_the_site():
    got = remat_tui.analyze(make_scan(WRITTEN), args=ARGS, sites={"block": "dots_saveable"})
    line = _line_of(make_scan, "return blk(W, x), None")
    assert f"test_sites.py:{line}" in got.python
    assert "jax.checkpoint(block, policy=jax.checkpoint_policies.dots_saveable)" in got.python
    assert got.to_dict()["sites"][0]["override"] == "dots_saveable"


def test_unknown_site_lists_the_sites():
    with pytest.raises(RematError, match=r"no checkpoint site 'blok'.*1 \(block at test_sites"):
        remat_tui.analyze(make_scan(WRITTEN), args=ARGS, sites={"blok": "dots_saveable"})
    with pytest.raises(RematError, match="no checkpoint site 7"):
        remat_tui.analyze(make_scan(WRITTEN), args=ARGS, sites={7: "dots_saveable"})


def test_site_on_a_function_without_checkpoints_says_so():
    with pytest.raises(RematError, match="applies no jax.checkpoint"):
        remat_tui.analyze(make_scan("as_written"), args=ARGS, sites={1: "dots_saveable"})


def test_bad_site_spec_says_where():
    with pytest.raises(RematError, match=r"site block: .*column"):
        remat_tui.analyze(
            make_scan(WRITTEN), args=ARGS, sites={"block": "save_only_these_names(h)"}
        )


def _line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_a_function_without_a_checkpoint_cannot_take_a_policy():
    def unchecked(W, x):
        return jnp.cos(x @ W)

    blk = jax.checkpoint(block)

    def loss(Ws, x):
        return jnp.sum(unchecked(Ws[1], blk(Ws[0], x)))

    with pytest.raises(RematError, match=r"'unchecked' runs in this function but no jax"):
        remat_tui.analyze(loss, args=ARGS, sites={"unchecked": "dots_saveable"})


def test_the_code_to_paste_says_when_a_sites_line_is_not_known(tmp_path):
    # A checkpoint applied through a name the file's source does not show as
    # jax.checkpoint: no frame of the user's holds it when the target runs,
    # and no call in the file names it.
    path = tmp_path / "hidden.py"
    path.write_text(
        "import jax, jax.numpy as jnp\nimport remat_tui\n\n"
        "def g(x):\n    return jnp.sin(jnp.sin(x))\n\n"
        'make = getattr(jax, "checkpoint")\n'
        'f = remat_tui.target(args=lambda: (jnp.ones(3),), name="f")(make(g))\n'
    )
    a = remat_tui.analyze(load_targets(str(path))["f"], sites={1: "as_written"})
    assert a.sites[0].source is None
    assert a.python.splitlines()[0] == "# line not known (site 1)"


def test_a_checkpoint_applied_at_module_level_has_its_line():
    # notebook.py's f4 is jax.checkpoint applied at module level, inside
    # remat_tui.target's call: found in the file, the only one of f4_layers.
    path = example("notebook.py")
    line = 1 + next(
        i for i, text in enumerate(open(path).read().splitlines())
        if "jax.checkpoint(f4_layers" in text
    )  # fmt: skip
    a = remat_tui.analyze(load_targets(path)["f4"], sites={1: "as_written"})
    assert a.sites[0].source.line == line
    assert a.python.splitlines()[0] == f"# notebook.py:{line} (site 1)"
