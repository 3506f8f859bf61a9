"""Provides the Analysis model: residuals, names, jaxpr panes and their line maps
(the places they point to in the user's code, Source, Origin and Site, are
`core.places`'s, re-exported here).

Plain dataclasses, so an Analysis can be cached, turned into the JSON report
(Contract 3) and drawn by the app. One exception: each JaxprView keeps its
jaxpr's equations (behind `source_lookup`) to find source lines on demand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypedDict

from remat_tui.core.display import Displayable
from remat_tui.core.places import Origin, Site, SiteFlops, Source, Wrapper, source_dict

__all__ = [
    "MEMORY_CATEGORIES", "Analysis", "JaxprView", "NamedValue", "Origin", "Residual", "Site",
    "SiteFlops", "Source", "Totals", "Wrapper",
]  # fmt: skip

# Contract 7: what the bytes live at a compiled peak are (`xla.buffers.memory`).
MEMORY_CATEGORIES = ("argument", "output", "residual", "recomputed", "temporary")


class _StoryField:
    """`Residual.story`: a Story, or a deferred one (`Deferred`, from a
    full analysis' lazily told stories, `trace.story`) resolved the
    first time it is read and kept. A data descriptor, so the dataclass's
    `__init__` and `dataclasses.replace` store through it and every reader
    (equality, `to_dict`, the reports) sees the Story itself."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if obj is None:
            return None  # the field's default
        value = obj.__dict__[self.slot]
        if isinstance(value, Deferred):
            value = obj.__dict__[self.slot] = value.resolve()
        return value

    def __set__(self, obj: object, value: object) -> None:
        obj.__dict__[self.slot] = value


@dataclass(frozen=True)
class Deferred:
    """A story not told yet: `stories.at(index)` on first read (`stories`
    tells every residual's at once, once, thread-safely)."""

    stories: Any
    index: int

    def resolve(self) -> Any:
        return self.stories.at(self.index)


class Flops(TypedDict):
    """`Analysis.flops`: the forward jaxpr's, the whole backward jaxpr's (None
    when the view read the linear program instead: a compare or suggest row)
    and the forward work the backward pass does again."""

    forward: int
    backward: int | None
    recompute: int


@dataclass(frozen=True)
class Residual:
    """One value the forward pass saves, in JAX's order and words.

    Attributes:
        text: exactly the line `print_saved_residuals` prints for it.
        aval: `"f32[32,128]"`; an offloaded value shows its memory,
            `"f32<host>[32,128]"`.
        shape: its shape.
        dtype: its dtype's name, `"float32"`.
        bytes: its global array size (in the JSON, `global_bytes`; its
            `bytes` there are one device's, `device_share`).
        memory: `"device"`, or `"host"` when the policy offloads it.
        kind: `"argument"`, `"output"` (of a primitive), `"named"` (a
            `checkpoint_name`), `"literal"`, `"constant"` or `"jit_output"`.
        primitive: the primitive JAX names for it, or None.
        name: its `checkpoint_name`, for a named residual.
        argument: its path in the arguments (`"params[0][0]"`), for an argument.
        source: the line JAX attributes it to, or None.
        forward_lines: the forward pane's lines that define it.
        backward_lines: the backward pane's lines that read it.
        origin: where its value was really computed (an `Origin`).
        bytes_per_device: what one device holds, when its aval is sharded.
        story: why it is saved, what made it, what reads it and what the
            compiled step made of it (a `stories.Story`), in a full analysis.
    """

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
    origin: Origin | None = None
    bytes_per_device: int | None = None  # set when its aval is sharded over devices
    story: Any = _StoryField()  # Contract 14 (`core.stories`), in a full analysis

    def to_dict(self) -> dict:
        return {
            "text": self.text,
            "aval": self.aval,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "bytes": self.device_share,
            "global_bytes": self.bytes,
            "memory": self.memory,
            "kind": self.kind,
            "primitive": self.primitive,
            "name": self.name,
            "argument": self.argument,
            "source": source_dict(self.source),
            "origin": None if self.origin is None else self.origin.to_dict(),
            "bytes_per_device": self.device_share,
            "story": None if self.story is None else self.story.to_dict(),
        }

    def __getstate__(self) -> dict:
        """Pickled with its story told: a deferred one holds jaxprs."""
        return {**self.__dict__, "_story": self.story}

    @property
    def device_share(self) -> int:
        """Bytes this residual takes on each device it is sharded over."""
        return self.bytes if self.bytes_per_device is None else self.bytes_per_device


@dataclass(frozen=True)
class NamedValue:
    """A `checkpoint_name` the function defines, with what it names.

    Attributes:
        name: the name.
        avals: the distinct avals tagged with it.
        bytes: the bytes of one tagged value (the first).
        count: how many equations apply the name.
        source: where it is applied first, or None.
        total_bytes: every tagged value's bytes, scan bodies counted per
            iteration: what saving the name costs in all.
    """

    name: str
    avals: tuple[str, ...]  # distinct avals tagged with this name
    bytes: int  # bytes of one tagged value (the first)
    count: int  # how many equations apply this name
    source: Source | None
    total_bytes: int = 0  # every tagged value, scan bodies counted per iteration


@dataclass
class JaxprView:
    """A jaxpr's text and what each of its lines is: one of the two panes.

    Attributes:
        text: the jaxpr as JAX prints it.
        lines: the same, one string per line.
        residual_lines: line -> indices (in `Analysis.residuals`) of the
            residuals the line defines (forward) or reads (backward).
        recompute_lines: the lines that re-run forward work (backward).
        transfer_lines: the lines that bring an offloaded residual back from
            host memory (backward).
        recompute_eqns: how many equations re-run forward work.
        mark_lines: the lines a display marks (◀ Rn, ↻): where an equation
            begins, and lines outside any equation (a header naming the
            inputs); an equation's further printed lines get no marks of
            their own.
    """

    text: str
    lines: list[str]
    residual_lines: dict[int, list[int]]  # line -> indices of residuals it defines/reads
    recompute_lines: set[int] = field(default_factory=set)
    transfer_lines: set[int] = field(default_factory=set)
    recompute_eqns: int = 0  # equations that re-run forward work
    mark_lines: set[int] = field(default_factory=set)  # equation starts and headers
    # Looked up per line on demand: a 10k-line jaxpr has 10k lookups and the
    # app needs only the lines on screen.
    source_lookup: Callable[[int], Source | None] = field(default=lambda i: None, repr=False)

    def source(self, line: int) -> Source | None:
        """The user's source line behind the equation printed on `line`."""
        return self.source_lookup(line)


@dataclass
class Totals:
    """Sums over an analysis' residuals, one device's (Contract 17): each
    residual counted by what one device holds of it (`Residual.device_share`),
    its whole size where its aval carries no sharding. The `global_*` figures
    sum the residuals' global array sizes; they equal the others on one
    device.

    Attributes:
        count: how many residuals.
        bytes: all of them.
        bytes_excluding_arguments: all but the function's own arguments,
            which are in memory whatever the policy: the figure a policy
            changes.
        device_bytes: those on the device.
        host_bytes: those offloaded to the host.
        global_bytes: `bytes` in global array sizes.
        global_bytes_excluding_arguments: `bytes_excluding_arguments` in
            global array sizes.
        global_device_bytes: `device_bytes` in global array sizes.
        global_host_bytes: `host_bytes` in global array sizes.
    """

    count: int
    bytes: int
    bytes_excluding_arguments: int
    device_bytes: int
    host_bytes: int
    global_bytes: int
    global_bytes_excluding_arguments: int
    global_device_bytes: int
    global_host_bytes: int

    @property
    def device_bytes_per_device(self) -> int:
        """`device_bytes` (its name before every total was one device's)."""
        return self.device_bytes

    def to_dict(self) -> dict:
        return dict(vars(self)) | {"device_bytes_per_device": self.device_bytes}


@dataclass
class Analysis(Displayable):
    """Everything remat-tui knows about one target under one configuration
    (outer policy, site overrides, device): what `analyze` returns.

    Attributes:
        target_file: the target's file, or None for a function given in code.
        target_name: the target's name.
        policy: the outer policy's canonical spec.
        python: the code to paste for this configuration.
        device: `{"platform", "id", "description"}` of the device analysed on.
        residuals: the saved residuals (`Residual`s), in JAX's order.
        names: the `checkpoint_name`s the function defines (`NamedValue`s).
        forward: the forward (`vjp`) jaxpr's pane (a `JaxprView`).
        backward: the backward jaxpr's pane.
        warnings: what the analysis warns of (a spec naming no name, ...).
        trace_seconds: how long tracing took.
        jax_version: the JAX that traced it.
        tool_version: remat-tui's version.
        sites: every `jax.checkpoint` in the code (`Site`s).
        config: the configuration asked for (hashable: outer policy, site
            overrides, device).
        flops: `{"forward", "backward", "recompute"}`: FLOPs of the forward
            jaxpr, of the whole backward jaxpr, and of the forward work the
            backward pass does again.
        flops_exact: False when a `while` loop's body had to be counted once.
        compiled: with `compiled=True`, XLA's numbers for the compiled step
            (a `Compiled`); else None.
        time: with `compiled=True` on a chip the table knows, the step-time
            estimate in its parts (a `StepTime` as a dict); else None.
        measured: with `measure=True`, the step run on the device (a
            `Measured` as a dict); else None.
        gradients: with `verify=True`, the step run against the code as
            written's on the device (a `Verification`, Contract 18); else None.
        applied: the parts of the configuration that change nothing, and
            why (`trace.applied.Applied`s): a name no checkpoint_name makes,
            one the policy does not reach, ...
        effects: the calls back to Python in the program and whether the
            backward pass runs each again (`trace.effects.Effect`s, issue 43).
        auto_sharded_devices: how many devices the example arguments
            sharded automatically are placed over (1: none is): their avals
            carry no sharding, so the residual bytes are global array sizes.
    """

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
    sites: list[Site] = field(default_factory=list)
    config: Any = None  # the Config asked for (core.setup.config), the app's cache key
    dots: tuple[int, int] = (0, 0)  # dot_generals in the forward pass, and those unbatched
    flops: Flops = field(default_factory=lambda: Flops(forward=0, backward=0, recompute=0))
    flops_exact: bool = True
    compiled: Any = None  # a Compiled (`xla.compile.costs`), on request
    time: dict | None = None  # `xla.estimates.step_time`'s estimate, as its JSON
    measured: dict | None = None  # `xla.run.measure`'s run, as its JSON
    applied: list = field(default_factory=list)  # Contract 14: what changes nothing
    effects: list = field(default_factory=list)  # callbacks, and which run again (issue 43)
    # Contract 18, on request: its step run against the code as written's on
    # the device (a `xla.verify.runs` `Verification`).
    gradients: Any = None
    # How many devices the arguments sharded automatically are placed over;
    # their avals carry no sharding: the residual bytes are global array sizes.
    auto_sharded_devices: int = 1

    @property
    def sharded(self) -> bool:
        return any(r.bytes_per_device is not None for r in self.residuals)

    @cached_property
    def totals(self) -> Totals:
        """The residuals' sums (a `Totals`). Summed once: the residual list
        does not change after analysis."""
        rs = self.residuals
        return Totals(
            count=len(rs),
            bytes=sum(r.device_share for r in rs),
            bytes_excluding_arguments=sum(r.device_share for r in rs if r.kind != "argument"),
            device_bytes=sum(r.device_share for r in rs if r.memory == "device"),
            host_bytes=sum(r.device_share for r in rs if r.memory == "host"),
            global_bytes=sum(r.bytes for r in rs),
            global_bytes_excluding_arguments=sum(r.bytes for r in rs if r.kind != "argument"),
            global_device_bytes=sum(r.bytes for r in rs if r.memory == "device"),
            global_host_bytes=sum(r.bytes for r in rs if r.memory == "host"),
        )

    def to_dict(self) -> dict:
        """The JSON report object (schema 1): what `remat-tui report
        --format json` prints."""
        return {
            "schema": 1,
            "tool": {"name": "remat-tui", "version": self.tool_version},
            "jax_version": self.jax_version,
            "target": {"file": self.target_file, "name": self.target_name},
            "device": dict(self.device),
            "policy": {"spec": self.policy, "python": self.python},
            "sites": [site.to_dict() for site in self.sites],
            "residuals": [r.to_dict() for r in self.residuals],
            "totals": self.totals.to_dict(),
            "auto_sharded_devices": self.auto_sharded_devices,
            "flops": dict(self.flops),
            "flops_exact": self.flops_exact,
            "compiled": None if self.compiled is None else self.compiled.to_dict(),
            "time": self.time,
            "measured": self.measured,
            "applied": [v.to_dict() for v in self.applied],
            "effects": [e.to_dict() for e in self.effects],
            "gradients": None if self.gradients is None else self.gradients.to_dict(),
            "structure": getattr(self.config, "structure", None)
            and self.config.structure.to_dict(),
            "jaxprs": {"forward": self.forward.text, "backward": self.backward.text},
        }
