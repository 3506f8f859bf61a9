"""Provides the Analysis model: residuals, names, jaxpr panes and their line maps.

Plain dataclasses, so an Analysis can be cached, turned into the JSON report
(Contract 3) and drawn by the app. One exception: each JaxprView keeps its
jaxpr's equations (behind `source_lookup`) to find source lines on demand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property


@dataclass(frozen=True)
class Source:
    file: str
    line: int
    column: int
    function: str

    def short(self) -> str:
        import os

        return f"{os.path.basename(self.file)}:{self.line} ({self.function})"


@dataclass(frozen=True)
class Residual:
    """One value the forward pass saves, in JAX's order and words."""

    text: str  # exactly the line print_saved_residuals prints
    aval: str  # f32[5] or f32<host>[6]
    shape: tuple[int, ...]
    dtype: str
    bytes: int
    memory: str  # "device" | "host"
    kind: str  # argument | output | named | literal | constant | jit_output
    primitive: str | None
    name: str | None  # the checkpoint_name, for named residuals
    argument: str | None  # the argument path, for argument residuals
    source: Source | None
    forward_lines: tuple[int, ...] = ()  # lines of the equation (or header) defining it
    forward_var: str | None = None  # its variable name in the forward pane
    backward_lines: tuple[int, ...] = ()  # lines of backward equations reading it
    backward_var: str | None = None  # its input variable name in the backward pane

    def to_dict(self) -> dict:
        return {
            "text": self.text,
            "aval": self.aval,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "bytes": self.bytes,
            "memory": self.memory,
            "kind": self.kind,
            "primitive": self.primitive,
            "name": self.name,
            "argument": self.argument,
            "source": None
            if self.source is None
            else {
                "file": self.source.file,
                "line": self.source.line,
                "column": self.source.column,
                "function": self.source.function,
            },
        }


@dataclass(frozen=True)
class NamedValue:
    """A `checkpoint_name` the function defines, with what it names."""

    name: str
    avals: tuple[str, ...]  # distinct avals tagged with this name
    bytes: int  # bytes of one tagged value (the first)
    count: int  # how many equations apply this name
    source: Source | None


@dataclass
class JaxprView:
    """A jaxpr's text and what each of its lines is."""

    text: str
    lines: list[str]
    residual_lines: dict[int, list[int]]  # line -> indices of residuals it defines/reads
    recompute_lines: set[int] = field(default_factory=set)
    recompute_eqns: int = 0  # equations that re-run forward work
    # Looked up per line on demand: a 10k-line jaxpr has 10k lookups and the
    # app needs only the lines on screen.
    source_lookup: Callable[[int], Source | None] = field(default=lambda i: None, repr=False)

    def source(self, line: int) -> Source | None:
        """The user's source line behind the equation printed on `line`."""
        return self.source_lookup(line)


@dataclass
class Totals:
    count: int
    bytes: int
    bytes_excluding_arguments: int
    device_bytes: int
    host_bytes: int

    def to_dict(self) -> dict:
        return dict(vars(self))


@dataclass
class Analysis:
    """Everything remat-tui knows about one target under one policy on one device."""

    target_file: str | None
    target_name: str
    policy: str  # canonical spec
    python: str  # paste-able snippet
    device: dict  # {"platform", "id", "description"}
    residuals: list[Residual]
    names: list[NamedValue]
    forward: JaxprView
    backward: JaxprView
    warnings: list[str]
    trace_seconds: float
    jax_version: str
    tool_version: str

    @cached_property
    def totals(self) -> Totals:
        """Summed once: the residual list does not change after analysis."""
        rs = self.residuals
        return Totals(
            count=len(rs),
            bytes=sum(r.bytes for r in rs),
            bytes_excluding_arguments=sum(r.bytes for r in rs if r.kind != "argument"),
            device_bytes=sum(r.bytes for r in rs if r.memory == "device"),
            host_bytes=sum(r.bytes for r in rs if r.memory == "host"),
        )

    def to_dict(self) -> dict:
        """The JSON report object of Contract 3 (schema 1)."""
        return {
            "schema": 1,
            "tool": {"name": "remat-tui", "version": self.tool_version},
            "jax_version": self.jax_version,
            "target": {"file": self.target_file, "name": self.target_name},
            "device": dict(self.device),
            "policy": {"spec": self.policy, "python": self.python},
            "residuals": [r.to_dict() for r in self.residuals],
            "totals": self.totals.to_dict(),
            "jaxprs": {"forward": self.forward.text, "backward": self.backward.text},
        }
