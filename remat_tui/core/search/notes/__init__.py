"""Provides the notes said beside a search's numbers: why a row changes
nothing, or is not worth its offload.

- `unchanged`: why a policy or site override may change nothing
  (`notes_for`, `spare_verdict`).
- `verdicts`: `name_verdicts`, whether saving each checkpoint_name alone
  spares any recompute.
- `reruns`: `rerun_beneath`, the work beneath a named value the backward pass
  still re-runs.
- `offloads`: `judge_offloads`, the rows that offload to no avail.
"""
