"""Provides suggest (Contracts 6, 8 and 12): the least-cost configuration whose
memory fits a budget.

- `pipeline`: `suggest` and `Suggestion`, the search from its candidates to
  its answer: a way of searching (`enumeration`, `modelled`) returns what it
  `Found`, and `conclude` answers from it.
- `evaluator`: `Evaluator`, the one maker of suggest's rows (analyse, each
  configuration once: `Analysed`; judge offloads, compile, run), its one test
  of an answer, and `SearchProgress`.
- `candidates`: the configurations suggest weighs.
- `ordered`: the ordered list: listed candidates compiled from the least cost
  up, only what can change the answer (`compile_in_order`, `Ordered`).
- `choice`: `answers` (whether a row could be the answer), `choose`, the
  answer among the rows, and what is said of them.
- `verified`: `verified_answer`, the answer run on the device against the code
  as written.
"""
