"""fit --optimize as the command line says it (issue 41, item 12): each
batch searched once, the progress counting the searches, a batch where
nothing fits said as that batch's, and the summary's compiles those the
`compiles:` line counts."""

import re

import jax
from exact_oracle import hand_peak_and_counts

import remat_tui
from remat_tui import cli

SCALES = """
import jax, jax.numpy as jnp, remat_tui

@remat_tui.target(args=lambda batch=4: (jax.ShapeDtypeStruct((16, 16), jnp.float32),
                                        jax.ShapeDtypeStruct((batch, 16), jnp.float32)))
def f(w, x):
    return jnp.mean(jnp.tanh(x @ w) ** 2)
"""


def test_fit_optimize_searches_each_batch_once_and_says_so(write_target, capsys):
    path = write_target(SCALES)
    target = remat_tui.load_targets(path)["f"]
    peaks = {b: hand_peak_and_counts(target.fn, target.args(b))[0] for b in (3, 4)}
    nothing = jax.checkpoint(target.fn, policy=jax.checkpoint_policies.nothing_saveable)
    assert hand_peak_and_counts(nothing, target.args(4))[0] > peaks[3]  # premise
    budget = peaks[3]  # the example's batch, 4, does not fit; 3 does
    assert peaks[4] > budget

    status = cli.main(["fit", path, "--budget", str(budget), "--optimize"])
    out, err = capsys.readouterr()
    assert status == 0, err
    progress = re.findall(
        r"remat-tui: \[search (\d+)\] fit --optimize: (?:(.*?) -> )?trying (\d+)", err
    )
    # The searches counted one by one, each at a batch not tried before.
    assert [int(n) for n, _, _ in progress] == list(range(1, len(progress) + 1))
    tried = [int(b) for _, _, b in progress]
    assert len(set(tried)) == len(tried) and tried[0] == 4 and 3 in tried
    for _, known, batch in progress:
        assert f"not {batch}" not in known and f"fits {batch}" not in known, known
    assert f"[{len(tried)} searches] fit --optimize: largest batch 3 (fits 3, not 4)" in err

    rows = [line for line in out.splitlines() if re.match(r"^[★ ] +(✗ )?\d", line)]
    assert len(rows) == len(tried)
    four = next(line for line in rows if "✗ 4" in line)
    assert "nothing fits at batch 4, whatever the decisions" in four
    assert "not even" not in out
    # The summary's compiles are the `compiles:` line's.
    said = re.search(r"remat-tui: compiles: (\d+) programs? compiled", err)
    summary = re.search(
        r"searched exactly \(every decision at each\), (\d+) programs? compiled", out
    )
    assert said and summary and said[1] == summary[1], (err, out)

    result = remat_tui.fit(target, budget, optimize=True)
    best = result.best
    assert best.batch == 3 and best.peak_bytes == peaks[3]  # JAX's own, by hand
    assert sorted(r.batch or r.not_fit for r in result.rows) == sorted(tried)
