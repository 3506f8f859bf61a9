"""remat-tui: see what JAX autodiff saves for the backward pass.

The package root stays light: importing it loads neither jax nor textual, so
`remat-tui --help` and a target file's `import remat_tui` are instant. The
heavy entry points (`load_targets`, `analyze`) import the core on first call.
"""

from remat_tui.errors import RematError
from remat_tui.registry import Target, target
from remat_tui.version import __version__

__all__ = [
    "RematError",
    "Target",
    "__version__",
    "analyze",
    "compare",
    "diff",
    "fit",
    "load_targets",
    "suggest",
    "target",
]


def load_targets(path):
    """Import the target file at `path` and return its targets by name."""
    from remat_tui.core.setup.loading import load_targets as _load

    return _load(path)


def analyze(
    fn,
    args=None,
    kwargs=None,
    policy="as_written",
    device=None,
    sites=None,
    compiled=False,
    measure=False,
    runs=5,
):
    """Analyse a `Target` or a plain callable under `policy`, with `sites`
    ({site id or checkpointed function name: spec}) overriding the checkpoints
    written in the code (see core.trace.analysis). `compiled=True` also compiles the
    training step (or the gradient, keeping the loss) for `device`:
    `analysis.compiled` and the estimate `analysis.time` (core.xla.compiled_analysis).
    `measure=True` compiles it and runs it there `runs` times: `analysis.measured`."""
    if compiled or measure:
        from remat_tui.core.xla.compiled_analysis import analyze_compiled

        return analyze_compiled(
            fn, args, kwargs, policy=policy, device=device, sites=sites, measure=measure, runs=runs
        )
    from remat_tui.core.trace.analysis import analyze as _analyze

    return _analyze(fn, args, kwargs, policy=policy, device=device, sites=sites)


def compare(
    fn,
    args=None,
    kwargs=None,
    policies=None,
    sites=None,
    compiled=False,
    device=None,
    measure=False,
    runs=5,
):
    """Rows of costs, one per configuration, Pareto-optimal ones marked
    (core.search.compare). `measure=True` compiles each and runs it on
    `device` `runs` times: rows rank by the measured time."""
    from remat_tui.core.search.compare import compare as _compare

    return _compare(
        fn,
        args,
        kwargs,
        policies=policies,
        sites=sites,
        compiled=compiled,
        device=device,
        measure=measure,
        runs=runs,
    )


def suggest(
    fn, budget, args=None, kwargs=None, compiled=False, device=None, sites=None, measure=False,
    runs=5,
):  # fmt: skip
    """The least-cost configuration whose memory fits `budget` bytes or a size
    like '2GiB'; `measure=True` chooses by the time measured on `device`."""
    from remat_tui.core.search.suggest import suggest as _suggest
    from remat_tui.report.units import parse_size

    budget = parse_size(budget) if isinstance(budget, str) else budget
    return _suggest(
        fn, budget, args, kwargs, compiled=compiled, device=device, sites=sites,
        measure=measure, runs=runs,
    )  # fmt: skip


def diff(fn, a="as_written", b="as_written", args=None, kwargs=None, sites_a=None, sites_b=None):
    """What policy `a` (with `sites_a`) saves that `b` does not, and back (core.search.diff)."""
    from remat_tui.core.search.diff import diff as _diff
    from remat_tui.core.setup.config import Config
    from remat_tui.core.trace.configured import as_target

    target = as_target(fn, args, kwargs)
    first = Config.make(a, sites_a, declared=target.policies)
    second = Config.make(b, sites_b, declared=target.policies)
    return _diff(target, first, second)


def fit(
    fn, budget, args=None, kwargs=None, policies=None, sites=None, device=None, multiple=1,
    max_batch=None, measure=False, runs=5,
):  # fmt: skip
    """Per configuration, the largest batch whose compiled step fits `budget`
    (bytes per device, or a size like '16GiB'), its step time and examples
    per second, best first (core.search.fit). The target's `args` factory
    must take `batch` (`args=lambda batch=32: ...`); `multiple`: batches in
    steps of that many; `measure=True` runs each row's step on `device`."""
    from remat_tui.core.search.fit import fit as _fit
    from remat_tui.report.units import parse_size

    budget = parse_size(budget) if isinstance(budget, str) else budget
    return _fit(
        fn, budget, args, kwargs, policies=policies, sites=sites, device=device,
        multiple=multiple, max_batch=max_batch, measure=measure, runs=runs,
    )  # fmt: skip
