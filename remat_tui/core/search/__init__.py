"""Provides many configurations weighed: the top stage of the core. Its rooms,
top to bottom (each imports only those beneath it: pyproject.toml's
import-linter contract):

- `fit`: the largest batch that fits a budget, per configuration (Contract 10).
- `suggest`: the least-cost configuration that fits a budget (Contract 8).
- `diff`: what two configurations save differently (Contract 6).
- `check`: one configuration against a saved baseline (Contract 14).
- `compare`: one row of costs per configuration, the Pareto front marked
  (Contract 6).
- `exact`: the exact search over every name decision at every place, and what
  its answer is proven against (Contract 12).
- `notes`: why a row changes nothing, or offloads to no avail.
- `verified_rows`: compare's rows run on the device against the code as
  written (`compare --verify`).
- `configs`: the configurations a search weighs: merged where they make the
  same decisions, skipped where the user says, and the structures worth trying.
- `rows`: `Row`, one configuration's costs, the unit every search above deals in.
- `request`: what compare, suggest and fit build once before searching (the
  target, the code as written's configuration, the skips, the runs).

A search's path: `suggest.pipeline.suggest` lists its candidates
(`suggest.candidates`, from `configs`) for one `suggest.evaluator.Evaluator`,
which alone makes and changes the rows (`rows.Row`: analysed by `compare`,
judged by `notes`, compiled through core/xla's `compile.service`); the
ordered list compiles them from the least cost up (`suggest.ordered`), or,
where the space is too large to list, the name decisions go to
`exact.search`; `suggest.choice` picks the answer and `exact.certificate`
says what it is proven against.
"""
