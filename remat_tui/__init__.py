"""remat-tui: see what JAX autodiff saves for the backward pass.

The package root stays light: importing it loads neither jax nor textual nor
the widget stack, so `remat-tui --help` and a target file's `import remat_tui`
are instant. The heavy entry points (`load_targets`, `analyze`, ...) import
the core on first call, and the displays of their results (notebook/hooks.py:
HTML in notebooks, rich in terminals).
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
    "load_targets",
    "show",
    "suggest",
    "target",
    "widget",
]


def _displays() -> None:
    """Give the results their displays (notebook/hooks.py; see core/display.py)."""
    from remat_tui.notebook import hooks  # noqa: F401


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

        _displays()
        return analyze_compiled(
            fn, args, kwargs, policy=policy, device=device, sites=sites, measure=measure, runs=runs
        )
    from remat_tui.core.trace.analysis import analyze as _analyze

    _displays()
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

    _displays()
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
    _displays()
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
    _displays()
    return _diff(target, first, second)


def show(f, *args, **kwargs) -> None:
    """Display what `f(*args, **kwargs)` saves for the backward pass: the
    forward and backward jaxprs side by side, residuals highlighted, each as
    `print_saved_residuals` words it. A drop-in for JAX's notebook helper
    `print_fwd_bwd`: HTML in a notebook, rich in a terminal; returns None."""
    from remat_tui.notebook.show import show as _show

    _show(f, *args, **kwargs)


def widget(f, *args, **kwargs):
    """A live notebook view of `f(*args, **kwargs)`: pick a policy, save,
    recompute or offload each checkpoint_name, pick a device, and the display
    of `show` follows, traced in the background. Needs the notebook extra:
    pip install 'remat-tui[notebook]'."""
    from remat_tui.notebook.widget import widget as _widget

    return _widget(f, *args, **kwargs)
