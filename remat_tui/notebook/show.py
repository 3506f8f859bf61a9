"""Provides `show(f, *args, **kwargs)`: what JAX's remat notebook's
`print_fwd_bwd` prints (the forward and backward jaxprs side by side), with
the saved residuals in `print_saved_residuals`' words, their bytes and lines,
and recomputation marked. One HTML display in a notebook, rich in a terminal;
it displays at once and returns None, as `print_fwd_bwd` does."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from remat_tui.errors import RematError
from remat_tui.registry import Target


def show(f: Target | Callable, *args: Any, **kwargs: Any) -> None:
    """Analyse `f(*args, **kwargs)` as written (so a function already wrapped in
    `jax.checkpoint(..., policy=...)` shows that policy) and display it. `f`
    may also be a `remat_tui.Target`, with no arguments: its own are used."""
    from remat_tui.core.trace.analysis import analyze
    from remat_tui.notebook import hooks  # noqa: F401 (the displays of results)

    require_function(f, "show")
    if isinstance(f, Target) and not args and not kwargs:
        analysis = analyze(f)
    else:
        analysis = analyze(f, args, kwargs)
    display(analysis)


def require_function(f: object, entry: str) -> None:
    """`f` must be what `entry` analyses: a function (or a Target); else a
    RematError that says so, before any tracing turns it into JAX's words."""
    if isinstance(f, Target) or callable(f):
        return
    shown = repr(f)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    raise RematError(
        f"{entry} takes the function to analyse, then its arguments: "
        f"remat_tui.{entry}(f, *args, **kwargs). Its first argument here is {shown} "
        f"({type(f).__name__}), not a function."
    )


def display(result: object) -> None:
    """Show a result: through IPython's display in a notebook, printed with
    rich anywhere else."""
    if in_notebook():
        from IPython.display import display as ipython_display

        ipython_display(result)
        return
    from rich.console import Console

    Console().print(result)


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (Jupyter, VS Code, Colab), where
    HTML displays; a terminal IPython or plain Python prints text."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None
