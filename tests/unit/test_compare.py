"""compare, diff and suggest (Contract 6): every row is what the full analysis
of its configuration says; suggest equals brute force on small cases."""

import itertools
import json
import subprocess

import jax
import jax.numpy as jnp
import pytest
from conftest import example, jax_saved_residuals
from jax.ad_checkpoint import checkpoint_name

import remat_tui
from remat_tui.core.search.compare import compare
from remat_tui.core.search.diff import diff
from remat_tui.core.search.notes.unchanged import SPARES_LITTLE
from remat_tui.core.search.suggest.candidates import STATES
from remat_tui.core.search.suggest.pipeline import suggest
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.report.comparisons import render_diff


def block(W, x):
    h = checkpoint_name(jnp.sin(x @ W), "h")
    g = checkpoint_name(jnp.tanh(h @ W.T), "g")
    return x + g * h


def make(spec):
    blk = jax.checkpoint(block, policy=policies.build(policies.parse(spec)))

    def loss(Ws, x):
        return jnp.sum(jax.lax.scan(lambda x, W: (blk(W, x), None), x, Ws)[0] ** 2)

    return loss


ARGS = (jnp.ones((3, 8, 8)) * 0.1, jnp.ones((4, 8)))
LOSS = make("nothing_saveable")


def full(config: Config):
    return remat_tui.analyze(LOSS, args=ARGS, sites=config.site_overrides, policy=config.policy)


@pytest.fixture(scope="module")
def comparison():
    return compare(LOSS, args=ARGS)


def test_every_row_is_its_full_analysis(comparison):
    for row in comparison.rows:
        a = full(row.config)
        assert row.device_bytes == a.totals.device_bytes, row.config
        assert row.host_bytes == a.totals.host_bytes
        assert row.recompute_flops == a.flops["recompute"]
        assert row.residuals == tuple(r.text for r in a.residuals)


def test_rows_cover_builtins_names_and_sites(comparison):
    configs = {r.config for r in comparison.rows}
    for spec in policies.BUILTINS:
        assert Config(spec) in configs
    assert Config.make(sites={"block": "save_only_these_names('h')"}) in configs
    offload_all = policies.names_policy([], ["g", "h"]).canonical
    assert Config.make(sites={"block": offload_all}) in configs
    assert Config.make(sites={"block": "as_written"}) in configs  # "what if I drop it"
    assert len(configs) == len(comparison.rows)  # no configuration twice


def test_pareto_rows_are_exactly_the_undominated(comparison):
    """Uncompiled rows weigh recompute FLOPs, then host bytes; a row whose
    offload is slower than recomputing is never on the front."""
    rows = comparison.rows
    eligible = [r for r in rows if not r.offload_slower]

    def cost(r):
        return (r.recompute_flops, r.host_bytes)

    def dominates(a, b):
        return (
            a.weighed_bytes <= b.weighed_bytes
            and cost(a) <= cost(b)
            and (a.weighed_bytes < b.weighed_bytes or cost(a) < cost(b))
        )

    for row in rows:
        assert row.pareto == (row in eligible and not any(dominates(o, row) for o in eligible))
    assert any(r.pareto for r in rows)


def test_compare_json_follows_contract_6(comparison):
    d = comparison.to_dict()
    assert set(d["rows"][0]) >= {
        "policy",
        "sites",
        "python",
        "device_bytes",
        "host_bytes",
        "recompute_flops",
        "compiled",
        "pareto",
        "notes",
    }
    json.dumps(d)  # serialisable


def test_a_site_at_its_own_policy_is_the_code_as_written(comparison):
    """nothing_saveable is what the code already says at the site: that
    configuration decides what the code as written decides, and is merged
    with it before anything is traced (issue 31: one program, one row)."""
    same = Config.make(sites={"block": "nothing_saveable"})
    assert all(r.config != same for r in comparison.rows)
    (written,) = [r for r in comparison.rows if r.config == Config()]
    assert full(same).residuals == full(Config()).residuals  # the premise, by the analysis


def test_diff_matches_the_two_analyses():
    a = Config.make(sites={"block": "nothing_saveable"})
    b = Config.make(sites={"block": "save_only_these_names('h')"})
    d = diff(LOSS, a, b, args=ARGS)
    texts_a = [r.text for r in full(a).residuals]
    texts_b = [r.text for r in full(b).residuals]
    assert sorted(e["text"] for e in d.only_a + d.both) == sorted(texts_a)
    assert sorted(e["text"] for e in d.only_b + d.both) == sorted(texts_b)
    assert d.only_b and not d.only_a  # saving h adds residuals, drops none here
    assert d.bytes_delta == full(b).totals.device_bytes - full(a).totals.device_bytes
    assert d.recompute_flops_delta < 0  # h is no longer recomputed
    assert set(d.to_dict()) >= {"only_a", "only_b", "both", "bytes_delta", "recompute_flops_delta"}


def brute_force(budget: int):
    """Every configuration suggest's space holds, analysed one by one: each
    policy at the site, and each built-in around the whole function (as
    compare lists them); an offload is left out, as suggest leaves it out on
    the CPU, whose compile has no host memory to offload to."""
    specs = [*policies.builtin_specs()]
    for states in itertools.product(STATES, repeat=2):
        saved = [n for n, s in zip(("g", "h"), states, strict=True) if s == "save"]
        off = [n for n, s in zip(("g", "h"), states, strict=True) if s == "offload"]
        specs.append(policies.names_policy(saved, off).canonical)
    analysed = {s: full(Config.make(sites={"block": s})) for s in specs}

    # The CPU's compile has no host memory (tests/unit/test_offload_without_host.py):
    # no offload is ever the answer there.
    rows = [(Config.make(sites={"block": s}), analysed[s]) for s in specs
            if not analysed[s].totals.host_bytes]  # fmt: skip
    rows.append((Config(), full(Config())))
    for spec in policies.BUILTINS[1:]:  # around the whole function, the site as written
        outer = Config(spec)
        analysed_outer = full(outer)
        if not analysed_outer.totals.host_bytes:
            rows.append((outer, analysed_outer))
    fitting = [(c, a) for c, a in rows if a.totals.device_bytes <= budget]

    def cost(ca):
        a = ca[1]
        return (a.flops["recompute"], a.totals.host_bytes, a.totals.device_bytes)

    return min(fitting, key=cost)


@pytest.mark.parametrize("budget_share", [0.5, 0.8, 1.0])
def test_suggest_equals_brute_force(budget_share):
    most = full(Config.make(sites={"block": "everything_saveable"})).totals.device_bytes
    budget = int(most * budget_share)
    got = suggest(LOSS, budget, args=ARGS)
    assert got.exact and got.fits
    _, want = brute_force(budget)
    assert got.best.recompute_flops == want.flops["recompute"]
    assert got.best.weighed_bytes <= budget
    assert got.searched == len({r.config for r in got.rows})


def test_suggest_beyond_the_listed_space_is_the_models_and_says_so(monkeypatch):
    """Beyond the space listed whole, the exact search's model: it fits, says
    so, and tries saving both names together (the greedy chain of names
    saved, one of its first points), which no single decision is."""
    import remat_tui.core.search.suggest.pipeline as suggest_module

    monkeypatch.setattr(suggest_module, "ENUMERATE_LIMIT", 1)
    most = full(Config.make(sites={"block": "everything_saveable"}))
    budget = int(most.totals.device_bytes * 0.8)
    got = suggest(LOSS, budget, args=ARGS)
    assert got.search.method == "model" and got.fits and got.best.weighed_bytes <= budget
    assert got.exact == got.search.proven
    both_saved = Config(sites=(("block", policies.names_policy(["g", "h"], [])),))
    assert both_saved in {r.config for r in got.rows}


def test_suggest_when_nothing_fits_shows_the_smallest():
    got = suggest(LOSS, 1, args=ARGS)
    assert not got.fits
    # (Offloads are never the answer on the CPU, whose compile has no host memory.)
    usable = [r for r in got.rows if not r.offload_without_host]
    assert got.best.weighed_bytes == min(r.weighed_bytes for r in usable)


def test_cli_compare_suggest_diff(remat_tui_cmd):
    target = f"{example('notebook.py')}:f4"

    def run(*argv):
        return subprocess.run([remat_tui_cmd, *argv], capture_output=True, text=True, timeout=300)

    out = run(
        "compare",
        target,
        "--policy",
        "nothing_saveable",
        "--policy",
        "dots_saveable",
        "--format",
        "json",
    )
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert [r["policy"] for r in rows] == ["nothing_saveable", "dots_saveable"]
    assert "[1/2]" in out.stderr  # progress, one line per configuration
    out = run("suggest", target, "--budget", "1GiB", "--format", "json")
    assert out.returncode == 0 and json.loads(out.stdout)["fits"] is True
    out = run("diff", target, "--policy", "nothing_saveable", "--vs", "everything_saveable")
    assert out.returncode == 0 and "only in B" in out.stdout
    bad = run("suggest", target, "--budget", "lots")
    assert bad.returncode == 2 and "size 'lots'" in bad.stderr and "Traceback" not in bad.stderr


def test_python_api_entry_points():
    rows = remat_tui.compare(LOSS, args=ARGS, policies=["nothing_saveable"]).rows
    assert [r.config.policy for r in rows] == ["nothing_saveable"]
    got = remat_tui.suggest(LOSS, "1GiB", args=ARGS)
    assert got.fits and got.best.recompute_flops == 0  # everything fits: save all
    d = remat_tui.diff(LOSS, "nothing_saveable", "everything_saveable", args=ARGS)
    assert d.to_dict()["a"]["policy"] == "nothing_saveable"


def test_notes_explain_a_dots_policy_every_dot_defeats_and_an_empty_offload():
    from remat_tui.core.search.notes.unchanged import intrinsic_notes

    def batched(W, x):  # every dot has a batch dimension (b)
        return jnp.sum(jnp.sin(jnp.einsum("bij,bjk->bik", W, x)))

    args = (jnp.ones((2, 3, 3)), jnp.ones((2, 3, 3)))
    a = remat_tui.analyze(batched, args=args, policy="dots_with_no_batch_dims_saveable")
    assert any("saves no dot here" in n for n in intrinsic_notes(a))
    plain = remat_tui.analyze(LOSS, args=ARGS, policy="dots_with_no_batch_dims_saveable")
    assert not any("saves no dot" in n for n in intrinsic_notes(plain))  # its dots are unbatched
    off = policies.names_policy([], ["nope"]).canonical
    a = remat_tui.analyze(batched, args=args, policy=off)
    assert any("offloads nothing" in n for n in intrinsic_notes(a))


def test_rows_at_a_function_replace_a_site_set_by_id():
    """Compare started from `site 1: X` (the app passes what is shown): a row
    for the function's sites must not be overruled by the id."""
    c = compare(LOSS, args=ARGS, sites={1: "everything_saveable"})
    rows = {r.config: r for r in c.rows}
    want = Config.make(sites={"block": "nothing_saveable"})
    assert want in rows  # the id override was replaced, not kept beside it
    assert rows[want].recompute_flops == full(want).flops["recompute"] > 0


def test_notes_name_no_device_and_never_say_an_outer_policy_stops_at_checkpoints():
    # An outer policy around code with checkpoints changes what is saved (JAX's
    # own lists differ), so no note may say it does not reach inside them; and
    # every row shares the device, so no note names it.
    rows = remat_tui.compare(
        LOSS, args=ARGS, policies=["as_written", "nothing_saveable"], device="cpu:0"
    ).rows
    written, outer = rows
    assert jax_saved_residuals(LOSS, "nothing_saveable", ARGS, {}) != jax_saved_residuals(
        LOSS, "as_written", ARGS, {}
    )
    assert outer.residuals != written.residuals
    notes = [n for r in rows for n in r.notes]
    assert not any("does not reach" in n for n in notes)
    every = remat_tui.compare(LOSS, args=ARGS, device="cpu:0").rows
    notes = [n for r in every for n in r.notes]
    assert notes  # (a site at its own policy, which "changes nothing", is merged away)
    assert not any("cpu:0" in n for n in notes)


def make_two_named_projections(spec):
    """A scan whose body saves two values JAX words alike (`output of scan` at
    the same line, the same aval): only their names tell them apart."""

    def body(x, w):
        q = checkpoint_name(jnp.sin(x @ w), "q")
        k = checkpoint_name(jnp.cos(x @ w), "k")
        return x + q * k, None

    blk = jax.checkpoint(body, policy=policies.build(policies.parse(spec)))

    def loss(ws, x):
        return jnp.sum(jax.lax.scan(blk, x, ws)[0])

    return loss


def test_diff_tells_alike_scan_outputs_apart_by_origin():
    fn = make_two_named_projections("nothing_saveable")
    d = diff(
        fn,
        Config.make(sites={1: "save_only_these_names('k', 'q')"}),
        Config.make(sites={1: "save_only_these_names('q')"}),
        args=(jnp.ones((3, 8, 8)), jnp.ones((4, 8))),
    )
    (gone,) = d.only_a
    kept = [e for e in d.both if e["origin"] and "name 'q'" in e["origin"]]
    assert "output of scan" in gone["text"] and gone["origin"].startswith("name 'k' ×3")
    assert kept and all(e["text"] == gone["text"] for e in kept)
    assert "← name 'k' ×3" in render_diff(d, "text")


def gelu_block(x, w1, w2):
    h = checkpoint_name(x @ w1, "h")
    y = checkpoint_name(jax.nn.gelu(h), "gelu_out")
    return checkpoint_name(y @ w2, "out")


def gelu_loss(policy):
    def loss(x, w1, w2):
        return jnp.sum(jax.checkpoint(gelu_block, policy=policy)(x, w1, w2))

    return loss


GELU_ARGS = (jnp.ones((16, 32)), jnp.ones((32, 64)), jnp.ones((64, 32)))


def test_saving_a_name_that_spares_no_recompute_is_pointed_out():
    """GELU's output: its derivative reads h, so h's dot is recomputed whether
    or not the output is saved; `out`: the sum's derivative never reads it.
    The notes agree with the analyses of the same code, each policy by hand."""
    cp = jax.checkpoint_policies
    c = remat_tui.compare(gelu_loss(None), args=GELU_ARGS)
    notes = {dict(r.config.sites).get("gelu_block"): r.notes for r in c.rows}

    def measured(policy):
        return remat_tui.analyze(gelu_loss(policy), args=GELU_ARGS)

    nothing = measured(cp.nothing_saveable)
    for name in ("gelu_out", "h", "out"):
        alone = measured(cp.save_only_these_names(name))
        spared = nothing.flops["recompute"] - alone.flops["recompute"]
        said = [n for n in notes[f"save_only_these_names({name!r})"] if n.startswith("saving")]
        if spared > SPARES_LITTLE * nothing.flops["recompute"]:
            assert not said, name
        elif alone.totals.device_bytes > nothing.totals.device_bytes:
            assert said and "spares" in said[0] and "still re-runs" in said[0], name
        else:
            assert said and "keeps nothing" in said[0], name
    assert [n for n in notes["save_only_these_names('h')"] if n.startswith("saving")] == []


def test_name_verdicts_match_compares_notes():
    """What the app's Names list marks is what compare notes, at the same place."""
    from remat_tui.core.search.notes.verdicts import name_verdicts
    from remat_tui.core.trace.configured import as_target

    target = as_target(gelu_loss(None), GELU_ARGS, None)
    a = remat_tui.analyze(target)
    verdicts = name_verdicts(target, a.config, [n.name for n in a.names], "gelu_block", a.sites)
    assert set(verdicts) == {"gelu_out", "out"}
    rows = {dict(r.config.sites).get("gelu_block"): r for r in remat_tui.compare(target).rows}
    for name, verdict in verdicts.items():
        assert verdict in rows[f"save_only_these_names({name!r})"].notes


def test_a_row_with_the_code_as_writtens_residuals_but_another_peak_says_both():
    """everything_saveable around examples/mlp.py saves what the code as
    written saves (JAX's own residual lists agree), yet XLA compiles the
    wrapped program with more temporaries: the note says both, not
    "changes nothing" beside a different compiled peak."""
    (target,) = remat_tui.load_targets(example("mlp.py")).values()
    args = target.args() if callable(target.args) else target.args
    written = jax_saved_residuals(target.fn, "as_written", args, {})
    saveable = jax_saved_residuals(target.fn, "everything_saveable", args, {})
    c = compare(target, compiled=True)
    base = next(r for r in c.rows if r.config == Config())
    row = next(
        r for r in c.rows if r.config.spec.kind == "everything_saveable" and not r.config.sites
    )
    assert [line.split(" from ")[0] for line in written] == [
        line.split(" from ")[0] for line in saveable
    ]  # the premise: the same residuals, by JAX
    assert row.weighed_bytes != base.weighed_bytes  # the premise: compiled apart
    (note,) = [n for n in row.notes if "the same residuals" in n]
    assert not note.startswith("changes nothing") and "yet compiled it takes" in note
    for r in c.rows:  # wherever a row is said to change nothing, its peak is the same
        if any(n.startswith("changes nothing") for n in r.notes):
            assert r.weighed_bytes == base.weighed_bytes, r.config.label()
