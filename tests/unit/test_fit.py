"""fit (Contract 10): per policy, the largest batch whose compiled step fits a
budget. The oracle is JAX: `jax.value_and_grad` of the same function under
the same policy, compiled by hand at the batch fit answers and at the next
one, at test time; budgets are made from those peaks, never pasted.

Models are held out (written here, not the examples): tagged MLPs and a
scanned transformer, factories of their size, each compile well under a
second."""

import functools
import json
import re

import jax
import jax.numpy as jnp
import pytest
from jax.ad_checkpoint import checkpoint_name

import remat_tui
from remat_tui.cli import main
from remat_tui.core.xla.compile import shared as programs
from remat_tui.errors import RematError


def f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def tagged_mlp(widths=(48, 96, 96, 24), example=16):
    """GELU layers, each output named h0, h1, ...: (loss, args factory)."""

    def loss(params, x):
        for i, (w, b) in enumerate(params[:-1]):
            x = checkpoint_name(jax.nn.gelu(x @ w + b), f"h{i}")
        w, b = params[-1]
        return jnp.mean(jnp.square(x @ w + b))

    def args(batch=example):
        params = [(f32(m, n), f32(n)) for m, n in zip(widths[:-1], widths[1:], strict=True)]
        return params, f32(batch, widths[0])

    return loss, args


def residual_mlp(width=64, depth=3, example=8):
    """Pre-norm residual blocks with tanh, the normalised input and the
    activation named: (loss, args factory)."""

    def loss(params, x):
        for w1, w2 in params:
            h = checkpoint_name(jax.nn.standardize(x, axis=-1), "pre")
            x = x + checkpoint_name(jnp.tanh(h @ w1), "act") @ w2
        return jnp.mean(x**2)

    def args(batch=example):
        return [(f32(width, 2 * width), f32(2 * width, width)) for _ in range(depth)], f32(
            batch, width
        )

    return loss, args


def scanned_transformer(d=16, seq=8, layers=2, example=4):
    """Attention and MLP blocks under lax.scan, q, attn and mlp named."""

    def block(p, x):
        h = jax.nn.standardize(x, axis=-1)
        q = checkpoint_name(h @ p["wq"], "q")
        k, v = h @ p["wk"], h @ p["wv"]
        weights = jax.nn.softmax(jnp.einsum("bqd,bkd->bqk", q, k) / jnp.sqrt(d), axis=-1)
        x = x + checkpoint_name(jnp.einsum("bqk,bkd->bqd", weights, v) @ p["wo"], "attn")
        hidden = checkpoint_name(jax.nn.gelu(jax.nn.standardize(x, axis=-1) @ p["w1"]), "mlp")
        return x + hidden @ p["w2"]

    def loss(params, x):
        x, _ = jax.lax.scan(lambda x, p: (block(p, x), None), x, params)
        return jnp.mean(x**2)

    def args(batch=example):
        shapes = {"wq": (d, d), "wk": (d, d), "wv": (d, d), "wo": (d, d), "w1": (d, 4 * d),
                  "w2": (4 * d, d)}  # fmt: skip
        return {k: f32(layers, *s) for k, s in shapes.items()}, f32(batch, seq, d)

    return loss, args


cp = jax.checkpoint_policies
BY_HAND = {
    "nothing_saveable": cp.nothing_saveable,
    "everything_saveable": cp.everything_saveable,
    "dots_saveable": cp.dots_saveable,
    "save_only_these_names('h1')": cp.save_only_these_names("h1"),
    "save_only_these_names('attn')": cp.save_only_these_names("attn"),
}


@functools.cache
def by_hand(loss, args, policy: str, batch: int) -> int:
    """The peak of jax.value_and_grad of `loss` (its first argument, as the
    step users run) under `policy` at `batch`, compiled by JAX: argument +
    output + temp - alias."""
    fn = loss if policy == "as_written" else jax.checkpoint(loss, policy=BY_HAND[policy])
    built = args(batch)
    gradient = jax.value_and_grad(fn)
    m = jax.jit(gradient).lower(*built).compile().memory_analysis()
    return (
        m.argument_size_in_bytes
        + m.output_size_in_bytes
        + m.temp_size_in_bytes
        - m.alias_size_in_bytes
    )


def assert_largest(loss, args, row, budget: int, multiple: int = 1) -> None:
    """The row's batch fits by JAX's own compile and the next multiple does not."""
    assert row.complete and row.error is None
    assert row.batch > 0 and row.batch % multiple == 0
    assert by_hand(loss, args, row.policy, row.batch) <= budget
    assert by_hand(loss, args, row.policy, row.batch + multiple) > budget
    assert row.peak_bytes == by_hand(loss, args, row.policy, row.batch)


CASES = {
    "tagged_mlp": (
        tagged_mlp,
        ("as_written", "nothing_saveable", "save_only_these_names('h1')"),
        60,
    ),
    "scanned_transformer": (
        scanned_transformer,
        ("as_written", "save_only_these_names('attn')"),
        24,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fit_is_the_largest_batch_jax_fits(case):
    make, policies, aim = CASES[case]
    loss, args = make()
    # As written fits `aim` exactly: a policy whose peak is a few bytes more fits less.
    budget = by_hand(loss, args, "as_written", aim)
    result = remat_tui.fit(loss, budget, args=args, policies=list(policies))
    assert [r.policy for r in sorted(result.rows, key=lambda r: policies.index(r.policy))] == list(
        policies
    )
    for row in result.rows:
        assert_largest(loss, args, row, budget)
    answers = {r.policy: r.batch for r in result.rows}
    assert answers["as_written"] == aim
    assert len(set(answers.values())) > 1, answers
    # Ranked by examples per second, the first marked best.
    rates = [r.examples_per_second for r in result.rows]
    assert rates == sorted(rates, reverse=True) and result.rows[0].best
    assert [r.best for r in result.rows].count(True) == 1
    assert all(r.cost_source == "estimate" for r in result.rows)


def test_multiple_gives_a_multiple_within_one_step():
    loss, args = residual_mlp()
    budget = by_hand(loss, args, "nothing_saveable", 45)
    result = remat_tui.fit(
        loss, budget, args=args, policies=["nothing_saveable", "as_written"], multiple=8
    )
    for row in result.rows:
        assert_largest(loss, args, row, budget, multiple=8)


def sited_mlp(policy, width=32, depth=3, example=8):
    """Blocks under jax.checkpoint(block, policy=policy): one site, `block`."""

    def block(w, x):
        return checkpoint_name(jnp.sin(jnp.tanh(x @ w)), "out")

    def loss(ws, x):
        for w in ws:
            x = jax.checkpoint(block, policy=policy)(w, x)
        return jnp.mean(x**2)

    def args(batch=example):
        return [f32(width, width)] * depth, f32(batch, width)

    return loss, args


def test_a_site_override_is_the_source_with_that_policy():
    """--site block=P: the oracle is the same code with P written at the site."""
    written, args = sited_mlp(cp.everything_saveable)
    by_hand_site, _ = sited_mlp(cp.nothing_saveable)
    budget = by_hand(written, args, "as_written", 50)
    result = remat_tui.fit(written, budget, args=args, policies=["as_written"],
                           sites={"block": "nothing_saveable"})  # fmt: skip
    (row,) = result.rows
    assert row.config.sites == (("block", "nothing_saveable"),) and row.complete
    assert by_hand(by_hand_site, args, "as_written", row.batch) <= budget
    assert by_hand(by_hand_site, args, "as_written", row.batch + 1) > budget


def test_two_spellings_of_one_policy_are_one_row():
    loss, args = tagged_mlp(widths=(16, 32, 8))
    budget = by_hand(loss, args, "as_written", 20)
    written = ['save_only_these_names("h1")', "save_only_these_names('h1')"]
    result = remat_tui.fit(loss, budget, args=args, policies=written)
    assert [r.policy for r in result.rows] == ['save_only_these_names("h1")']
    assert result.rows[0].config.policy == "save_only_these_names('h1')"


def test_the_same_program_is_compiled_once():
    """dots_saveable and dots_with_no_batch_dims_saveable are one program on an
    MLP (JAX lowers them to the same text); the second is answered by the first."""
    programs.clear()
    loss, args = tagged_mlp(widths=(32, 64, 16))
    texts = {
        jax.jit(jax.value_and_grad(jax.checkpoint(loss, policy=p), argnums=(0, 1)))
        .lower(*args())
        .as_text()
        for p in (jax.checkpoint_policies.dots_saveable,
                  jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    }  # fmt: skip
    assert len(texts) == 1
    budget = by_hand(loss, args, "dots_saveable", 40)
    result = remat_tui.fit(
        loss, budget, args=args, policies=["dots_saveable", "dots_with_no_batch_dims_saveable"]
    )
    first, second = sorted(result.rows, key=lambda r: r.policy)
    assert first.batch == second.batch == 40
    assert {p.how for p in first.probes} == {programs.COMPILED}
    assert {p.how for p in second.probes} == {programs.SAME_PROGRAM}
    assert result.compiles == len(first.probes) and result.reused == len(second.probes)


def test_nothing_fits_is_a_row_with_what_batch_1_needs():
    loss, args = tagged_mlp(widths=(16, 32, 8))
    # On the CPU a batch of 1 takes more than a batch of 2 (matrix-vector
    # products); below both, and below every larger batch, nothing fits.
    budget = min(by_hand(loss, args, "as_written", b) for b in (1, 2)) - 1
    result = remat_tui.fit(loss, budget, args=args, policies=["as_written"])
    (row,) = result.rows
    assert row.batch == 0 and row.not_fit == 1
    assert row.needed_bytes == by_hand(loss, args, "as_written", 1)
    assert row.complete and not row.best and result.best is None
    data = result.to_dict()["rows"][0]
    assert data["batch"] == 0 and data["needed_bytes"] == row.needed_bytes


def test_cancel_keeps_the_rows_found_so_far():
    loss, args = tagged_mlp(widths=(16, 32, 8))
    budget = by_hand(loss, args, "as_written", 30)
    seen = []

    def progress(p):
        seen.append(p)

    # Stop once the second configuration has tried one batch.
    result = remat_tui.core.search.fit.batches.fit(
        loss, budget, args=args, policies=["as_written", "nothing_saveable", "dots_saveable"],
        progress=progress,
        cancelled=lambda: sum(1 for p in seen if p.index == 1 and p.trying) > 1,
    )  # fmt: skip
    assert result.cancelled
    done = [r for r in result.rows if r.complete]
    assert [r.policy for r in done] == ["as_written"]
    assert_largest(loss, args, done[0], budget)
    partial = [r for r in result.rows if not r.complete]
    assert [r.policy for r in partial] == ["nothing_saveable"] and partial[0].probes


def test_progress_shows_the_bracket_narrowing():
    from remat_tui.core.search.fit.results import FitProgress
    from remat_tui.core.setup.config import Config
    from remat_tui.report.fit import progress_line

    config = Config.make("nothing_saveable")
    said = FitProgress(0, 3, "nothing_saveable", config, 64, 128, 96, 5, 0)
    assert progress_line(said) == "fit nothing_saveable: fits 64, not 128 -> trying 96"
    loss, args = tagged_mlp(widths=(16, 32, 8))
    lines = []
    budget = by_hand(loss, args, "as_written", 30)
    remat_tui.core.search.fit.batches.fit(
        loss, budget, args=args, policies=["as_written"],
        progress=lambda p: lines.append(progress_line(p)),
    )  # fmt: skip
    assert lines[0] == "fit as_written: trying 16"
    assert lines[1].startswith("fit as_written: fits 16 -> trying ")
    assert lines[-1] == "fit as_written: largest batch 30 (fits 30, not 31)"


def test_measure_runs_the_row_batch():
    loss, args = tagged_mlp(widths=(16, 32, 8))
    budget = by_hand(loss, args, "as_written", 20)
    result = remat_tui.fit(loss, budget, args=args, policies=["as_written"], measure=True, runs=2)
    (row,) = result.rows
    assert row.cost_source == "measured" and row.measured.runs == 2
    assert row.examples_per_second == pytest.approx(row.batch / row.measured.min_seconds)


def test_a_batch_parameter_without_a_default():
    """No example batch: analysing it says so; fit starts from the smallest batch."""
    loss, args = tagged_mlp(widths=(16, 32, 8))

    def no_default(batch):
        return args(batch)

    with pytest.raises(RematError, match="has no default"):
        remat_tui.analyze(loss, args=no_default)
    budget = by_hand(loss, args, "as_written", 12)
    result = remat_tui.fit(loss, budget, args=no_default, policies=["as_written"])
    assert result.example_batch is None and result.rows[0].probes[0].batch == 1
    assert_largest(loss, args, result.rows[0], budget)


SCALES = """
import jax, jax.numpy as jnp, remat_tui

@remat_tui.target(args=lambda batch=4: (jax.ShapeDtypeStruct((16, 16), jnp.float32),
                                        jax.ShapeDtypeStruct((batch, 16), jnp.float32)))
def f(w, x):
    return jnp.mean(jnp.tanh(x @ w) ** 2)
"""
FIXED = SCALES.replace("lambda batch=4:", "lambda:").replace("(batch, 16)", "(4, 16)")
IGNORES_BATCH = SCALES.replace("(batch, 16)", "(4, 16)")


def _cli(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_json_has_contract_10s_keys(capsys, write_target):
    path = write_target(SCALES)
    policies = ["--policy", "nothing_saveable", "--policy", "dots_saveable"]
    status, out, err = _cli(capsys, "fit", path, "--budget", "64KiB", *policies, "--format", "json")
    assert status == 0, err
    data = json.loads(out)
    assert {"rows", "budget_bytes", "compiles", "device"} <= set(data)
    assert data["budget_bytes"] == 64 * 1024
    for row in data["rows"]:
        assert {"policy", "sites", "batch", "peak_bytes", "step_seconds",
                "examples_per_second", "cost_source"} <= set(row)  # fmt: skip
        assert row["peak_bytes"] <= 64 * 1024 and row["batch"] > 0
    assert {r["policy"] for r in data["rows"]} == {"nothing_saveable", "dots_saveable"}
    assert "trying" in err  # the progress, on stderr


@pytest.mark.parametrize(
    "source, argv, words",
    [
        (FIXED, ["--budget", "1MiB"], "its args factory takes no `batch` parameter"),
        (IGNORES_BATCH, ["--budget", "1MiB"], "the same shapes at batch 1 and 2"),
        (SCALES, ["--budget", "100B"], "below what the arguments alone take"),
        (SCALES, ["--budget", "1MiB", "--multiple", "0"], "--multiple 0"),
        (SCALES, ["--budget", "1MiB", "--max-batch", "4", "--multiple", "8"], "--max-batch 4"),
    ],
)  # fmt: skip
def test_cli_bad_input_exits_2_with_a_clear_message(capsys, write_target, source, argv, words):
    status, out, err = _cli(capsys, "fit", write_target(source), *argv)
    assert status == 2 and out == ""
    assert words in err and "Traceback" not in err
    assert err.startswith("remat-tui: error: ")


def test_not_scalable_says_how_to_make_it_scale(capsys, write_target):
    status, _, err = _cli(capsys, "fit", write_target(FIXED), "--budget", "1MiB")
    assert status == 2 and "lambda batch=32" in err


def test_reports_render(write_target):
    from remat_tui.report.fit import render_fit

    target = remat_tui.load_targets(write_target(SCALES))["f"]
    result = remat_tui.fit(target, "64KiB", policies=["nothing_saveable", "as_written"])
    text = render_fit(result, "text")
    best = result.best
    assert f"best: {best.policy} at batch {best.batch}" in text and best.python in text
    assert "★" in text
    md = render_fit(result, "md")
    assert md.startswith("# remat-tui fit") and f"```python\n{best.python}\n```" in md
    html = render_fit(result, "html")
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and "<script" not in html
    assert json.loads(render_fit(result, "json")) == json.loads(json.dumps(result.to_dict()))


def test_ctrl_c_writes_the_rows_found_so_far(remat_tui_cmd, write_target):
    """As a user runs it: the first Ctrl-C stops after the compile under way,
    the rows so far are written, exit status 130."""
    import os
    import signal
    import subprocess

    path = write_target(SCALES)
    proc = subprocess.Popen(
        [remat_tui_cmd, "fit", path, "--budget", "64KiB", "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
    )  # fmt: skip
    said = []
    for line in proc.stderr:  # progress, a line per batch tried
        said.append(line)
        if "[2/" in line:  # the second configuration has begun
            proc.send_signal(signal.SIGINT)
            break
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, "".join(said) + err
    assert "stopping after the compile under way" in err
    assert re.search(r"cancelled: \d+ rows? found so far, below", err), err
    data = json.loads(out)
    assert data["cancelled"] and 1 <= len(data["rows"]) <= 2
    assert any(r["complete"] and r["batch"] > 0 for r in data["rows"])


def test_max_batch_caps_the_search_at_a_multiple():
    loss, args = tagged_mlp(widths=(16, 32, 8))
    huge = 1 << 40  # everything fits: the cap is the answer
    result = remat_tui.fit(loss, huge, args=args, policies=["as_written"], multiple=8, max_batch=20)
    (row,) = result.rows
    assert row.batch == 16 and row.capped and row.not_fit is None
    assert [p.batch for p in row.probes] == [16]  # the example's 16, the largest multiple allowed


def test_cancelled_before_any_row_is_an_empty_answer():
    loss, args = tagged_mlp(widths=(16, 32, 8))
    from remat_tui.core.search.fit.batches import (
        fit,  # the core's (run alone, no other test imports it)
    )

    result = fit(loss, 1 << 30, args=args, cancelled=lambda: True)
    assert result.cancelled and result.rows == [] and result.best is None
