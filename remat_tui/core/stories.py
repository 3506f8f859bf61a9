"""Provides the records of a residual's story (Contract 14), a `Story` each:
the rule that saved it (`Rule`, `trace.rules`), the equation that made
it with the user's frames around it (`Made`) and the backward equations that
read it (`Reader`, both `trace.story`), and what XLA made of it in the
compiled step (`Fate`, `xla.fates.residuals`). Plain frozen data, beside
model.py's, so that every stage and every display reads the same records.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from remat_tui.core.model import Source

# Rule.kind: why autodiff saved the value.
ARGUMENT = "argument"  # an argument of the function: in memory anyway
CONSTANT = "constant"  # a literal or constant the backward pass reads
NO_CHECKPOINT = "no_checkpoint"  # under no checkpoint: what the backward pass needs
POLICY = "policy"  # the checkpoint's policy saves (or offloads) it
REGION_OUTPUT = "checkpoint_output"  # a checkpoint's output that code under none reads
UNEXPLAINED = "unexplained"  # the policy says recompute, yet JAX saved it

# Fate.what: what the compiled step did with it.
KEPT = "kept"  # a buffer holds it from the forward part into the backward part
RECOMPUTED = "recomputed"  # XLA computes it again in the backward part
FUSED = "fused"  # no buffer of its own: computed inside the backward part's fusions
MERGED = "merged"  # one buffer with another residual (the same value, or CSE)
REMOVED = "removed"  # not in the compiled step: nothing there reads it
INPUT_KEPT = "input_kept"  # XLA keeps what it is computed from instead, and recomputes it
UNKNOWN = "unknown"  # not told apart from values like it (said why)


@dataclass(frozen=True)
class Rule:
    """Why a residual is saved: the decision of the policy in effect at the
    equation that made it, in words.

    Attributes:
        kind: ARGUMENT, CONSTANT, NO_CHECKPOINT, POLICY, REGION_OUTPUT or
            UNEXPLAINED (module constants).
        words: the rule in a sentence.
        policy: the policy in effect there (canonical spec, or `custom:<repr>`),
            or None under no checkpoint.
        site: the checkpoint site whose policy it is, or None for the outer
            policy (or none).
        decision: what that policy answers at the equation: `"save"`,
            `"offload"` or `"recompute"`; None where no policy was asked.
        matched: which of the policy's rules matched (`"dot_no_batch_dims"`,
            `"name_saved"`, ...), or None.
        equation: the equation the policy was asked about (`"name layer0"`,
            `"dot_general"`), or None.
    """

    kind: str
    words: str
    policy: str | None = None
    site: int | None = None
    decision: str | None = None
    matched: str | None = None
    equation: str | None = None

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "words": self.words,
            "policy": self.policy,
            "site": self.site,
            "decision": self.decision,
            "matched": self.matched,
            "equation": self.equation,
        }


@dataclass(frozen=True)
class Reader:
    """A backward equation that reads a residual.

    Attributes:
        primitive: its primitive (`"mul"`).
        line: its line in the backward pane, from 0.
        source: the user's line behind it, or None.
        recomputes: whether it re-runs forward work (inside a checkpoint's
            recomputation), rather than transposing it.
    """

    primitive: str
    line: int
    source: Source | None
    recomputes: bool = False

    def to_dict(self) -> dict:
        return {
            "primitive": self.primitive,
            "line": self.line + 1,
            "source": None if self.source is None else self.source.to_dict(),
            "recomputes": self.recomputes,
        }


@dataclass(frozen=True)
class Fate:
    """What the compiled step did with a residual.

    Attributes:
        what: KEPT, RECOMPUTED, FUSED, MERGED, REMOVED, INPUT_KEPT or UNKNOWN
            (module constants).
        words: it in a sentence.
        buffer: the compiled instruction whose buffer holds it (for
            INPUT_KEPT, holds its input), or None.
        bytes_at_peak: its bytes live at the compiled peak (0: not live there);
            for INPUT_KEPT, those of its inputs' buffers.
        merged_with: the residual (`"R8"`) it shares a buffer with, or None.
        disagrees: the jaxpr saves it but the compiled step keeps no buffer
            of it for the backward part.
    """

    what: str
    words: str
    buffer: str | None = None
    bytes_at_peak: int = 0
    merged_with: str | None = None
    disagrees: bool = False

    def to_dict(self) -> dict:
        return {
            "what": self.what,
            "words": self.words,
            "buffer": self.buffer,
            "bytes_at_peak": self.bytes_at_peak,
            "merged_with": self.merged_with,
            "disagrees": self.disagrees,
        }


@dataclass(frozen=True)
class Made:
    """The equation that computed a residual's value (its origin's).

    Attributes:
        primitive: its primitive (`"tanh"`).
        frames: the user's frames behind it, innermost first: the line and
            the calls that led to it.
        shape: its output's aval, per iteration inside a scan (`"f32[32,128]"`).
        same_as: the index of an earlier residual holding the same value
            (a checkpoint_name and the value it names), or None.
        argument: the function's flat argument it is, for an argument.
        relaid: (primitive, aval, frames) of the equations behind it that it
            only re-lays (a reshape's operand, its transpose's): XLA may keep
            the value as any of them.
        ordinal / alike: its place among the forward jaxpr's equations alike
            (same primitive, aval and frames, saved or not), and how many there
            are: one layer's line for each layer of an unrolled loop.
        inputs: (primitive, aval, frames) of the equations it is computed
            from, its equation's operands first, then theirs, a few steps
            back: what XLA may keep instead of it and compute it from.
        from_one: whether its equation reads a single value (`inputs[0]`)
            besides literals and constants: a function of that value alone.
        gathered_bytes: where its equation gathers it from the devices'
            shards (an all-gather once partitioned), one device's bytes of
            it: what recomputing it gathers again; else None.
    """

    primitive: str | None
    frames: tuple[Source, ...] = ()
    shape: str | None = None
    same_as: int | None = None
    argument: int | None = None
    relaid: tuple[tuple, ...] = ()
    ordinal: int | None = None
    alike: int = 0
    inputs: tuple[tuple, ...] = ()
    from_one: bool = False
    gathered_bytes: int | None = None

    def to_dict(self) -> dict:
        return {
            "primitive": self.primitive,
            "frames": [f.to_dict() for f in self.frames],
            "same_as": None if self.same_as is None else f"R{self.same_as + 1}",
            "gathered_bytes": self.gathered_bytes,
        }


@dataclass(frozen=True)
class Story:
    """A residual's whole story: `rule` (a `Rule`), `made` (a `Made`),
    `readers` (`Reader`s), `runs_again` (the calls back to Python that
    recomputing from it runs again, by the user's line: issue 43) and, once
    compiled, `xla` (a `Fate`)."""

    rule: Rule
    made: Made | None
    readers: tuple[Reader, ...] = ()
    xla: Fate | None = None
    runs_again: tuple[str, ...] = ()  # `pure_callback at model.py:39`

    def with_fate(self, fate: Fate | None) -> Story:
        return replace(self, xla=fate)

    def to_dict(self) -> dict:
        return {
            "rule": self.rule.to_dict(),
            "made_by": None if self.made is None else self.made.to_dict(),
            "readers": [reader.to_dict() for reader in self.readers],
            "xla": None if self.xla is None else self.xla.to_dict(),
            "runs_again": list(self.runs_again),
        }
