"""Search over code as users write it (issue 41, Contract 16): checkpoints
with no checkpoint_name (a loop of `jax.checkpoint(layer)`, three on three
lines as in the seed notebook's f2), a candidate JAX refuses, the outer
policies beside the sites', the code for one call of a loop, an answer the
estimate cannot tell from the code as written, and a stop inside the exact
search's compiles.

JAX is the oracle: the answers' residuals are print_saved_residuals' of the
same configuration built by hand (tests/models/unnamed_loops.py's
factories), optimality is against every configuration analysed one by one,
and "nothing fits" against compare's rows.
"""

import contextlib
import io
import itertools
import json
import subprocess
import sys
from dataclasses import replace

import jax
import pytest
from conftest import ROOT

import remat_tui
from remat_tui.core.search.compare import analysed_row, compare
from remat_tui.core.search.suggest.choice import answers, within_resolution
from remat_tui.core.search.suggest.pipeline import suggest
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.core.trace.configured import Cancelled
from remat_tui.core.xla.estimates.step_time import StepTime
from remat_tui.report.suggest import render_suggest

sys.path.insert(0, f"{ROOT}/tests/models")
import unnamed_loops as u  # noqa: E402

MODELS = f"{ROOT}/tests/models/unnamed_loops.py"
NOTEBOOK = f"{ROOT}/examples/notebook.py"
CP = jax.checkpoint_policies
# The policies a call may take, by the spelling remat-tui uses, and as JAX's.
BUILT = {
    "as_written": u.AS_WRITTEN,
    "everything_saveable": CP.everything_saveable,
    "nothing_saveable": CP.nothing_saveable,
    "dots_saveable": CP.dots_saveable,
    "dots_with_no_batch_dims_saveable": CP.dots_with_no_batch_dims_saveable,
}


@pytest.fixture(scope="module")
def targets():
    return remat_tui.load_targets(MODELS)


def residual_lines(fn, args) -> list[str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        jax.ad_checkpoint.print_saved_residuals(fn, *args)
    return buf.getvalue().splitlines()


def per_call(config: Config, calls: int = u.LAYERS) -> list:
    """The JAX policy of each call under `config` (site ids 1..calls, or the
    function's name for every call), None where the code's own stays."""
    sites = dict(config.site_specs)
    out = []
    for i in range(calls):
        spec = sites.get(i + 1, sites.get("layer"))
        out.append(None if spec is None else BUILT[policies.same_decisions(spec).canonical])
    return out


def by_hand(config: Config, make):
    """The configuration built by hand: the factory with each call's policy,
    under the outer policy where there is one."""
    fn = make(*per_call(config)) if make is u.make_lines else make(per_call(config).__getitem__)
    if config.spec.kind != policies.AS_WRITTEN:
        fn = jax.checkpoint(fn, policy=BUILT[config.spec.canonical])
    return fn


@pytest.mark.parametrize("name, make", [("loop", u.make_loop), ("lines", u.make_lines)])
def test_suggest_answers_without_names_at_the_least_recompute_of_every_per_call_choice(
    targets, name, make
):
    """No checkpoint_name: the search decides a whole policy per call (it
    crashed in scipy with 0 decisions). Its answer is the least recompute
    among every per-call assignment of the built-ins (6^3, analysed one by
    one) and every built-in around the whole function, and its residuals
    are JAX's for that configuration built by hand."""
    target, args = targets[name], u.loop_args()
    row = analysed_row(target)
    specs = [policies.parse(s) for s in BUILT]
    every = [
        Config(sites=tuple((i + 1, s) for i, s in enumerate(combo)))
        for combo in itertools.product(specs, repeat=u.LAYERS)
    ] + [Config(s) for s in specs[1:]]
    rows = [row(c) for c in every]
    sizes = sorted({r.device_bytes for r in rows})
    for budget in (sizes[1], sizes[len(sizes) // 2]):
        got = suggest(target, budget)
        fitting = [r for r in rows if r.device_bytes <= budget]
        assert got.fits and got.best.device_bytes <= budget
        assert got.best.recompute_flops == min(r.recompute_flops for r in fitting)
        assert got.search.method == "model" and got.search.decisions > 0
        assert list(got.best.residuals) == residual_lines(by_hand(got.best.config, make), args)
    assert "policy decision" in render_suggest(got, "text")


@pytest.mark.parametrize("name", ["f", "f2", "f3", "f4", "loss", "chain", "recursive"])
def test_suggest_answers_on_every_seed_notebook_target(name):
    """The seed notebook's seven functions: an answer compiled and not (the
    API), and through the CLI exit 0 and never a traceback."""
    target = remat_tui.load_targets(NOTEBOOK)[name]
    for compiled in (False, True):
        got = suggest(target, 1024, compiled=compiled)
        assert got.best.python and (got.fits or got.best.weighed_bytes > 1024)
    run = subprocess.run(
        [sys.executable, "-m", "remat_tui", "suggest", f"{NOTEBOOK}:{name}", "--budget", "1KiB",
         "--format", "json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert json.loads(run.stdout)["best"]["python"]


def test_a_candidate_jax_refuses_is_a_row_and_the_rest_answer(targets):
    """The rope's checkpoint under everything_saveable: JAX itself refuses
    it (the oracle: jax.vjp raises), compare lists it with JAX's words, and
    suggest answers from the rest, naming it."""
    target, args = targets["rope"], u.rope_args()
    with pytest.raises(Exception) as refused:
        jax.vjp(u.make_rope(CP.everything_saveable), *args)
    said = str(refused.value).splitlines()[0]
    rows = compare(target).rows
    bad = [r for r in rows if r.refused]
    assert [r.config.site_overrides for r in bad] == [{"rotate": "everything_saveable"}]
    assert said in bad[0].failure and not bad[0].fits and not bad[0].pareto
    from remat_tui.report.pareto import pareto_svg

    assert pareto_svg(rows).count("<circle") == len(rows) - 1  # no dot without numbers
    comparison = remat_tui.compare(target)  # the API: its displays registered
    assert said.rstrip(".") in comparison._repr_html_()
    got = suggest(target, max(r.device_bytes for r in rows))
    assert got.fits and not got.best.refused and not any(r.refused for r in got.rows)
    assert [r.config for r in got.refused] == [bad[0].config]
    assert said in render_suggest(got, "text")
    assert said in json.dumps(got.to_dict())


def test_skip_leaves_a_candidate_out_and_never_the_code_as_written(targets):
    target = targets["rope"]
    kept = compare(target, skip=["rotate=everything_saveable", "as_written"]).rows
    assert not any(r.refused for r in kept)
    assert Config() in [r.config for r in kept]  # the code as written stays
    assert not any(
        policies.AS_WRITTEN in (r.config.policy, *r.config.site_overrides.values())
        for r in kept
        if r.config != Config()
    )
    run = subprocess.run(
        [sys.executable, "-m", "remat_tui", "compare", f"{MODELS}:rope", "--skip",
         "rotate=everything_saveable", "--format", "json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert not any(r["refused"] for r in json.loads(run.stdout)["rows"])


@pytest.mark.parametrize("name", ["f2", "recursive"])
def test_nothing_fits_only_where_no_row_of_compare_fits(name):
    """Where the code has sites, suggest weighs the outer policies too: at
    every budget between compare's rows, it fits exactly when a row of
    compare fits, and its answer is no larger than needed."""
    target = remat_tui.load_targets(NOTEBOOK)[name]
    rows = [r for r in compare(target).rows if not r.offload_without_host and not r.refused]
    for size in sorted({r.device_bytes for r in rows}):
        got = suggest(target, size)
        assert got.fits, f"{name}: nothing fits {size} B, but compare lists a row that does"
        below = suggest(target, size - 1)
        smallest = min(r.device_bytes for r in rows)
        assert below.fits == (size - 1 >= smallest)
        if not below.fits:
            assert below.best.device_bytes == smallest


def test_one_calls_override_is_written_as_a_policy_by_the_calls_index(targets):
    """`--site 2=as_written` on a loop: the code is a function of the call's
    index, never the line's change for every call, and pasted into the loop
    it gives JAX the residuals the analysis reported."""
    target, args = targets["loop"], u.loop_args()
    a = remat_tui.analyze(target, sites={2: "as_written"})
    code = a.python
    assert "def layer_at(i):" in code and code.count("policy=") <= u.LAYERS
    namespace = {"jax": jax, "layer": u.layer}
    exec(code.split("\n# and where the loop calls it:")[0], namespace)
    pasted = u.make_loop_of(namespace["layer_at"])
    assert residual_lines(pasted, args) == [r.text for r in a.residuals]
    by_policy = remat_tui.analyze(target, sites={2: "dots_saveable"}).python
    assert "def layer_policy(i):" in by_policy and "policy=layer_policy(i)" in by_policy
    namespace = {"jax": jax}
    exec(by_policy.split("\n# and where the loop calls it:")[0], namespace)
    pasted = u.make_loop(namespace["layer_policy"])
    want = remat_tui.analyze(target, sites={2: "dots_saveable"}).residuals
    assert residual_lines(pasted, args) == [r.text for r in want]


def test_checkpoints_on_their_own_lines_each_get_their_own_code(targets):
    a = remat_tui.analyze(targets["lines"], sites={1: "dots_saveable", 3: "as_written"})
    code = a.python
    assert "def " not in code  # no function of an index: each line is its own
    assert code.count("(site 1)") == 1 and code.count("(site 3)") == 1
    assert "(site 2)" not in code


def test_an_answer_within_the_estimates_resolution_keeps_the_code_as_written(monkeypatch):
    """Where the code as written fits and the best found beats its estimate
    by less than the estimate can tell, the answer is the code as written,
    and the best found is named beside it; beyond that, the best found."""
    from remat_tui.core.xla.estimates import step_time

    target = remat_tui.load_targets(NOTEBOOK)["f4"]
    monkeypatch.setattr(step_time, "RESOLUTION", 0.0)
    strict = suggest(target, 1 << 30, compiled=True)
    assert strict.fits and strict.best.config != strict.baseline.config  # the premise
    assert strict.set_aside is None
    saving = 1 - strict.best.cost[0] / strict.baseline.cost[0]
    monkeypatch.setattr(step_time, "RESOLUTION", saving * 1.01)
    kept = suggest(target, 1 << 30, compiled=True)
    assert kept.best.config == kept.baseline.config
    assert kept.set_aside is not None and kept.set_aside.row.config == strict.best.config
    text = render_suggest(kept, "text")
    assert "keep the code as written" in text and f"{saving:.1%}" in text
    assert "the best found (set aside)" in text.split("proof:")[1].splitlines()[0]
    assert kept.to_dict()["set_aside"]["configuration"] == strict.best.config.label()
    monkeypatch.setattr(step_time, "RESOLUTION", saving * 0.99)
    assert suggest(target, 1 << 30, compiled=True).best.config == strict.best.config


def test_within_resolution_never_sets_aside_by_flops_or_when_as_written_does_not_fit(targets):
    row = analysed_row(targets["loop"])
    written, cheaper = (
        row(Config()),
        row(Config(sites=(("layer", policies.parse("dots_saveable")),))),
    )
    assert within_resolution(cheaper, written, answers(1 << 30)) is None  # FLOPs are exact
    written.time, cheaper.time = (StepTime(s, s, 0.0, 0.0, 0.0, "cpu") for s in (1.0, 0.95))
    assert within_resolution(cheaper, written, answers(1 << 30)) is not None
    assert within_resolution(cheaper, written, answers(written.device_bytes - 1)) is None


def test_a_stop_inside_the_exact_searchs_compiles_keeps_the_best_verified(targets):
    """Ctrl-C (here: `cancelled` turning true) while the exact search is
    compiling: the best answer compiled so far is kept, with its gap, not
    lost (it raised out of the search before)."""
    target = targets["loop"]
    compiles = []

    def progress(done, total, config, stage=""):
        if stage == "compiling":
            compiles.append(config)

    def stop():
        return len(compiles) >= 8  # the code as written, then into the model's singles

    got = suggest(target, 1 << 30, compiled=True, cancelled=stop, progress=progress)
    assert got.cancelled and got.fits and got.best.compiled
    assert got.search.method == "model"
    assert "stopped" in render_suggest(got, "text").splitlines()[0]


def test_a_stop_before_anything_compiled_says_so(targets):
    with pytest.raises(Cancelled):
        suggest(targets["loop"], 1 << 30, compiled=True, cancelled=lambda: True)


def test_one_blocks_policy_in_a_linen_list_is_one_policy_by_the_blocks_index():
    """A Python list of `nn.remat(Block)` (one line, a site per block): a
    policy for block 2 alone is `policy=Block_policy(i)` on that line, never
    a second `policy=` on it (a SyntaxError pasted), and the model built
    with the printed function gives JAX the residuals reported."""
    import importlib.util

    path = f"{ROOT}/tests/zoo/models/linen_list.py"
    spec = importlib.util.spec_from_file_location("linen_list_for_paste", path)
    linen_list = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(linen_list)
    target = remat_tui.load_targets(path)["loss"]
    a = remat_tui.analyze(target, sites={2: "dots_saveable"})
    code = a.python
    assert code.count("policy=Block_policy(i)") == 1 and "def Block_policy(i):" in code
    namespace = {"jax": jax}
    exec(code.split("\n# and where the loop calls it:")[0], namespace)
    pasted = linen_list.make_loss(namespace["Block_policy"])
    assert residual_lines(pasted, linen_list.example_args()) == [r.text for r in a.residuals]


def test_fit_optimize_finds_every_batch_plain_fit_finds(targets):
    """fit --optimize searches at each batch everything suggest weighs, the
    built-ins around the whole function included: its largest batch is at
    least the largest any configuration of plain fit reaches."""
    from remat_tui.core.search.fit.batches import fit

    target = targets["batched"]
    budget = remat_tui.analyze(target, compiled=True).compiled.peak_bytes * 3
    plain = fit(target, budget, max_batch=256)
    best = max(r.batch for r in plain.rows)
    assert 4 < best < 256  # the premise: more than the example's batch, less than the cap
    optimized = fit(target, budget, max_batch=256, optimize=True)
    assert max(r.batch for r in optimized.rows) >= best


def test_nothing_fits_tells_the_budget_from_the_smallest():
    """`nothing fits 2.1 GiB ... the smallest at 2.1 GiB` read as a
    contradiction: the two figures get the digits that tell them apart."""
    from remat_tui.core.units import told_apart

    assert told_apart(int(2.25e9), 2_210_756_004) == ["2.10 GiB", "2.06 GiB"]
    assert told_apart(2**30, 2**30 + 5) == ["1,073,741,824 B", "1,073,741,829 B"]
    assert told_apart(2**30, 2**30) == ["1.0 GiB", "1.0 GiB"]


def test_nothing_fits_is_proven_over_what_was_searched(targets):
    """A space listed whole where nothing fits is proven so over the whole
    space, not "within the model" (there is none); the exact search's, within
    its model."""
    from remat_tui.report.suggest import proof_words

    got = suggest(targets["batched"], 1)
    assert not got.fits and got.search.method == "enumeration"
    assert proof_words(got.search) == (
        "nothing in the space can fit the budget (proven over the whole space)"
    )
    modelled = replace(got.search, method="model", decisions=3)
    assert proof_words(modelled).endswith("(proven within the model)")


def test_a_checkpoint_applied_at_module_level_is_placed_at_its_line():
    """The seed's f3 = jax.checkpoint(f, ...) at module level: no frame of the
    user's holds that line when f3 runs, so the site had no line and its
    snippet said 'line not known'. It is the file's only jax.checkpoint of f."""
    source = open(NOTEBOOK).read().splitlines()
    line = 1 + next(i for i, text in enumerate(source) if "jax.checkpoint(f, policy=" in text)
    a = remat_tui.analyze(remat_tui.load_targets(NOTEBOOK)["f3"], sites={1: "nothing_saveable"})
    (site,) = a.sites
    assert (site.source.file, site.source.line) == (NOTEBOOK, line)
    assert a.python.startswith(f"# notebook.py:{line} (site 1)\njax.checkpoint(f, policy=")
