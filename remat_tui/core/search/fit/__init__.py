"""Provides fit (Contract 10): the largest batch whose compiled step fits a
memory budget, and what it buys in examples per second.

- `batches`: `fit`, per configuration.
- `bracket`: `next_batch`, where the search looks next (pure arithmetic).
- `optimize`: `fit --optimize`, suggest's best decisions at each batch,
  ranked by examples per second.
- `results`: what fit finds, as values: `Probe`, `FitRow`, `Fit` and
  `FitProgress`.
"""
