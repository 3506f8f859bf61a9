"""remat-tui: see what JAX autodiff saves for the backward pass.

The package root stays light: importing it loads neither jax nor textual, so
`remat-tui --help` and a target file's `import remat_tui` are instant. The
heavy entry points (`load_targets`, `analyze`) import the core on first call.
"""

from remat_tui.errors import RematError
from remat_tui.registry import Target, target

__version__ = "0.1.0"

__all__ = ["RematError", "Target", "__version__", "analyze", "load_targets", "target"]


def load_targets(path):
    """Import the target file at `path` and return its targets by name."""
    from remat_tui.core.loading import load_targets as _load

    return _load(path)


def analyze(
    fn, args=None, kwargs=None, policy="as_written", device=None, sites=None, compiled=False
):
    """Analyse a `Target` or a plain callable under `policy`, with `sites`
    ({site id or checkpointed function name: spec}) overriding the checkpoints
    written in the code (see core.analysis). `compiled=True` also compiles the
    gradient for `device` (never runs it): `analysis.compiled` (core.compiled)."""
    from remat_tui.core.analysis import analyze as _analyze

    return _analyze(
        fn,
        args=args,
        kwargs=kwargs,
        policy=policy,
        device=device,
        sites=sites,
        compiled=compiled,
    )
