"""Provides the one exception type remat-tui shows to users."""


class RematError(Exception):
    """A problem with the user's input, stated so they can fix it.

    The CLI prints `message` and exits with status 2; the app shows it in place.
    Never raised for remat-tui's own bugs, which should surface as tracebacks.
    """

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def _render_traceback_(self) -> list[str]:
        """What IPython and Jupyter show for it: the message, not remat-tui's
        own frames (IPython's hook for exceptions that render themselves)."""
        return [f"RematError: {self.message}"]
