"""Provides which JAX this is, whether remat-tui was tested with it, and the
error raised when an assumption about JAX's internals does not hold."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, TypeVar

import jax

from remat_tui.errors import RematError

# The oldest and newest JAX releases the test suite runs on (noxfile.py).
OLDEST_TESTED = (0, 10, 2)
NEWEST_TESTED = (0, 12)  # every 0.12.x


def version_tuple(text: str | None = None) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text or jax.__version__)[:4])


def untested_message() -> str | None:
    """What to tell the user, once, when this JAX is outside the tested range."""
    v = version_tuple()
    if v < OLDEST_TESTED:
        return (
            f"JAX {jax.__version__} is older than remat-tui supports (0.10.2 and newer); "
            "its residual lists may be worded differently from what is shown. "
            "Upgrade JAX: pip install -U jax."
        )
    if v[:2] > NEWEST_TESTED:
        return (
            f"JAX {jax.__version__} is newer than remat-tui was tested with "
            f"(0.10.2 to {'.'.join(map(str, NEWEST_TESTED))}.x); "
            "numbers are checked against JAX where they can be, but report anything odd."
        )
    return None


class JaxChanged(RematError):
    """JAX's internals are not what remat-tui expects (a JAX it does not know)."""

    def __init__(self, expected: str, detail: str = ""):
        tail = f" ({detail})" if detail else ""
        super().__init__(
            f"remat-tui does not understand JAX {jax.__version__} here: it expected "
            f"{expected}{tail}. remat-tui is tested with JAX 0.10.2 to "
            f"{'.'.join(map(str, NEWEST_TESTED))}.x; please report this with your JAX version."
        )


_Adapter = TypeVar("_Adapter", bound=Callable[..., Any])


def expects(what: str) -> Callable[[_Adapter], _Adapter]:
    """Decorator for an adapter: a lookup that fails because JAX's structure
    moved raises JaxChanged naming `what` it expected, not a raw traceback."""

    def wrap(fn: _Adapter) -> _Adapter:
        @functools.wraps(fn)
        def adapter(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (KeyError, AttributeError, IndexError, TypeError) as exc:
                raise JaxChanged(what, f"{type(exc).__name__}: {exc}") from None

        return adapter  # type: ignore[return-value]  # functools.wraps keeps fn's signature

    return wrap
