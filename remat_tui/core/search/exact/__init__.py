"""Provides the exact search (Contract 12): every name decision at every place,
searched by a model solved exactly and corrected by compiling.

- `search`: `search_names`, the search itself, which suggest runs where the
  space is too large to list.
- `space`: `Space`, the decisions and the configuration each assignment is.
- `model`: `Model`, what each decision does to the compiled peak and the
  step's cost, and its optimum under a budget (a mixed-integer program).
- `self_check`: `SelfCheck`, the compiles that rule out what the model has not
  measured once its optimum is verified.
- `certificate`: `Certificate`, what suggest's answer is proven against.
"""
