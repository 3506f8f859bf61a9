"""Provides suggest (Contracts 6, 8 and 12): the least-cost configuration whose
memory fits a budget.

- `pipeline`: `suggest` and `Suggestion`, the search from its candidates to
  its answer.
- `candidates`: the configurations suggest weighs, each analysed once
  (`Analysed`).
- `ordered`: how the candidates are compiled, from the least cost up, only
  what can change the answer (`compile_in_order`, `Runner`, `SearchProgress`).
- `choice`: `choose`, the answer among the rows, and what is said of them.
- `verified`: `verified_answer`, the answer run on the device against the code
  as written.
"""
