"""Provides the places in the user's code an analysis points to: a `Source`
line, a residual's `Origin` (where its value was really computed), and a
checkpoint `Site` (with the library `Wrapper` that applies it and its
`SiteFlops`). Plain frozen dataclasses, each with the JSON it reports
(`core.model` re-exports them with the Analysis that holds them).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Source:
    """A line of the user's code.

    Attributes:
        file: the file's path.
        line: the line, from 1.
        column: the column, from 1.
        function: the function the line is in.
    """

    file: str
    line: int
    column: int
    function: str

    def short(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line} ({self.function})"

    def where(self) -> str:
        """`file.py:45`, how tables and snippets point at a line."""
        return f"{os.path.basename(self.file)}:{self.line}"

    def to_dict(self) -> dict:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "function": self.function,
        }


def source_dict(source: Source | None) -> dict | None:
    return None if source is None else source.to_dict()


@dataclass(frozen=True)
class Origin:
    """Where a residual's value was really computed: followed into the scan,
    jit, remat, call and cond bodies JAX reports it as an output of.

    Attributes:
        primitive: the primitive that computed it (`"mul"`), or None.
        name: the `checkpoint_name` it carries there, or None.
        source: the user's own line (outside JAX and installed libraries,
            preferring the target's folder), or None.
        trip_count: the product of the scan lengths it is stacked over, or
            None outside loops.
        per_iteration: its aval in one iteration, when `trip_count` is set.
        site: the id of the checkpoint site whose body computed it, or None.
    """

    primitive: str | None
    name: str | None  # the checkpoint_name it carries, if any
    source: Source | None  # the user's own line (outside JAX and installed libraries)
    trip_count: int | None  # product of the scan lengths it was stacked over
    per_iteration: str | None  # its aval in one iteration, when trip_count is set
    site: int | None  # the checkpoint site whose body computed it

    def to_dict(self) -> dict:
        return {
            "primitive": self.primitive,
            "name": self.name,
            "source": source_dict(self.source),
            "trip_count": self.trip_count,
            "per_iteration": self.per_iteration,
            "site": self.site,
        }

    def label(self) -> str:
        """`name 'qkv' ×4  model.py:45`: what the residual table shows."""
        what = f"name {self.name!r}" if self.name else (self.primitive or "")
        if self.trip_count:
            what += f" ×{self.trip_count}"
        return f"{what}  {self.source.where()}" if self.source else what


@dataclass(frozen=True)
class SiteFlops:
    """A checkpoint site's FLOPs.

    Attributes:
        forward: its body in the forward pass, times the times it runs.
        recompute: the forward work the backward pass re-runs there under its
            current policy; None when that work cannot be told to be the site's.
    """

    forward: int
    recompute: int | None

    def to_dict(self) -> dict:
        return {"forward": self.forward, "recompute": self.recompute}


@dataclass(frozen=True)
class Wrapper:
    """The library call in the user's code that applies a site's checkpoint
    (`nn.remat`, `nnx.remat`, `eqx.filter_checkpoint`), read from their source.

    Attributes:
        call: the function called, as written (`"nn.remat"`).
        wrapped: what it wraps, as written (`"Encoder1DBlock"`), or None.
        policy: its `policy=` argument as written, or None where it passes none.
        policy_line: the line to change: that argument's (or the call's).
        config: where `getattr(jax.checkpoint_policies, X)` reads the
            policy's name, as written (`"self.remat_policy"`), or None.
    """

    call: str
    wrapped: str | None
    policy: str | None
    policy_line: int
    config: str | None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Site:
    """One `jax.checkpoint` application in the traced program (also
    `nnx.remat`, `nn.remat`, `eqx.filter_checkpoint`), inside scan, jit, cond
    and vmap bodies included.

    Attributes:
        id: 1, 2, ... in program order: `sites={1: spec}`, `--site 1=SPEC`.
        function: the checkpointed function's name: `sites={"block": spec}`
            sets every site of it.
        source: the user's line that applies the checkpoint (the wrapper's
            call for a library's), or None.
        policy: the canonical spec of the policy written there, or
            `custom:<name>` for a policy remat-tui cannot name.
        trip_count: the product of the enclosing scans' lengths, or None
            outside loops.
        override: the spec the analysis applied there instead, or None.
        flops: its FLOPs (a `SiteFlops`).
        called_at: the line that runs the checkpointed function, or None.
        wrapper: the library call that applies it, or None.
        prevent_cse: the `prevent_cse` it was applied with (False where the
            user wrote so): a checkpoint in the code printed for it keeps it.
    """

    id: int
    function: str
    source: Source | None  # the user's line that applies it
    policy: str  # canonical spec of the policy written there, or custom:<name>
    trip_count: int | None  # product of enclosing scan lengths; None outside loops
    override: str | None = None  # what the analysis applied there instead
    flops: SiteFlops | None = None  # set by the analysis
    called_at: Source | None = None  # where it runs (= source for jax.checkpoint)
    wrapper: Wrapper | None = None  # nn.remat / nnx.remat / eqx.filter_checkpoint
    # `policy` parsed (None for custom:), and what the analysis applied there
    # (its override's, else the same): the app's name states, never printed.
    spec: Any = field(default=None, compare=False, repr=False)
    effective_spec: Any = field(default=None, compare=False, repr=False)
    prevent_cse: bool = field(default=True, compare=False, repr=False)

    @property
    def keywords(self) -> str:
        """The keywords of its checkpoint, other than the policy, that code
        rewriting it must keep (`, prevent_cse=False`; empty for JAX's defaults)."""
        return "" if self.prevent_cse else ", prevent_cse=False"

    @property
    def effective(self) -> str:
        return self.override if self.override is not None else self.policy

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "function": self.function,
            "source": source_dict(self.source),
            "policy": self.policy,
            "trip_count": self.trip_count,
            "override": self.override,
            "flops": None if self.flops is None else self.flops.to_dict(),
            "called_at": source_dict(self.called_at),
            "wrapper": None if self.wrapper is None else self.wrapper.to_dict(),
            "prevent_cse": self.prevent_cse,
        }
