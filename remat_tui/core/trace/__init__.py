"""Provides one configuration traced once (traced.py: `Trace`) and the views of
it (analysis.py: the full analysis, the costs, a row of compare): the function
as the Config asks for it (configured.py), the forward and backward jaxprs of
`jax.vjp`, the residuals (residuals.py) and where they were made (origins.py,
names.py), checkpoint sites and their overrides (sites.py, primal.py), the
panes' line maps (linemap.py), and the forward work the backward pass does
again, found in the backward jaxpr or read from the linear program
(recomputation.py).

Every view (the app's panes, the reports, a row of compare) reads one Trace;
the stages above add compiling (xla) and weighing many (search).
"""
