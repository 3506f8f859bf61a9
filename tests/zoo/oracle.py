"""The zoo's oracle: a configuration built by hand through the model's
factory and compiled by JAX, and a printed snippet pasted into a copy of the
model's file and compiled the same way.

By hand means without remat-tui: a policy spec is evaluated as the Python it
is (`jax.checkpoint_policies.<spec>`), the step is `jax.value_and_grad` of
the first argument (for a function that returns an array, its vjp applied to
ones, which is what `value_and_grad` of its sum computes, beside the output),
and the peak is JAX's own memory analysis: arguments + outputs + temporaries
- aliased (the CPU's peak, tests/unit/exact_oracle.py).
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from zoo import NO_CHECKPOINT, Model, NotBuildable, import_as, load_module

CP = jax.checkpoint_policies
# Every name jax.checkpoint_policies has: a spec is Python over them.
POLICY_NAMESPACE = {k: getattr(CP, k) for k in dir(CP) if not k.startswith("_")}
AS_WRITTEN = "as_written"


def policy_by_hand(spec: str, own: dict) -> object:
    """The policy `spec` names: the target's own by name, else the spec
    evaluated over jax.checkpoint_policies (`dots_saveable`,
    `save_only_these_names('a')`)."""
    if spec in own:
        return own[spec]
    return eval(spec, {"__builtins__": {}}, POLICY_NAMESPACE)  # noqa: S307 (specs we print)


def function_by_hand(model: Model, row: dict, own: dict) -> Callable:
    """The function of a configuration (a row of the JSON: `policy`,
    `sites`, `structure`) built through the model's factory: every site as
    the file writes it, then the row's sites by function name, then by id
    (an id is the more precise), then the outer policy around it all."""
    if row.get("structure"):
        raise NotBuildable(f"a structure ({row['structure']}): by hand it rewrites the scan")
    per_site = list(model.written())
    for key, spec in sorted(row.get("sites", {}).items(), key=lambda kv: kv[0].isdigit()):
        policy = NO_CHECKPOINT if spec == AS_WRITTEN else policy_by_hand(spec, own)
        if key.isdigit():
            per_site[int(key) - 1] = policy
        else:
            hit = [i for i, f in enumerate(model.sites) if f == key]
            if not hit:
                raise NotBuildable(f"site {key!r}: the model's sites are {model.sites}")
            for i in hit:
                per_site[i] = policy
    fn = model.build(tuple(per_site))
    return outer(fn, row.get("policy", AS_WRITTEN), own)


def outer(fn: Callable, spec: str, own: dict) -> Callable:
    if spec == AS_WRITTEN:
        return fn
    return jax.checkpoint(fn, policy=policy_by_hand(spec, own))


# ---- the example arguments, by hand ------------------------------------------------


def example_batch(model: Model) -> int | None:
    """The `batch` default of the target's args factory (None: it takes none)."""
    args = registered(model).args
    if not callable(args):
        return None
    parameter = inspect.signature(args).parameters.get("batch")
    return None if parameter is None else parameter.default


def example_args(model: Model, batch: int | None = None, module: object = None) -> tuple:
    """The target's example arguments (its args called as the docs say:
    `devices` the CPU's devices, `batch` where given), made by the oracle's
    own import of the file where its args factory has a name there (an
    Equinox model's arguments are instances of the file's classes, which
    must be the classes the oracle's function combines them with; `module`:
    a pasted copy's, whose function combines them with its own classes)."""
    args = registered(model).args
    owner = module if module is not None else load_module(model.path)
    args = getattr(owner, getattr(args, "__name__", ""), args)
    if not callable(args):
        return tuple(args)
    parameters = inspect.signature(args).parameters
    kw = {}
    if "devices" in parameters:
        kw["devices"] = jax.devices("cpu")
    if batch is not None:
        kw["batch"] = batch
    return tuple(args(**kw))


_registered: dict[str, object] = {}


def registered(model: Model):
    """The model's Target, as `remat_tui.load_targets` gives it (its args,
    its own policies)."""
    import remat_tui

    if model.spec not in _registered:
        _registered[model.spec] = remat_tui.load_targets(model.path)[model.target]
    return _registered[model.spec]


# ---- JAX's numbers ------------------------------------------------------------------


def step(fn: Callable) -> Callable:
    """The step remat-tui compiles, written as a user would: the output and
    the gradient of the first argument."""

    def value_and_grad(params, *rest):
        out, vjp = jax.vjp(lambda p: fn(p, *rest), params)
        if jnp.ndim(out) == 0:  # a scalar loss: what jax.value_and_grad computes
            return jax.value_and_grad(fn)(params, *rest)
        return out, vjp(jnp.ones_like(out))[0]

    return value_and_grad


def hand_peak(fn: Callable, args: tuple) -> int:
    """JAX's compiled peak of the step: arguments + outputs + temporaries - aliased."""
    m = jax.jit(step(fn)).lower(*args).compile().memory_analysis()
    return (
        m.argument_size_in_bytes
        + m.output_size_in_bytes
        + m.temp_size_in_bytes
        - m.alias_size_in_bytes
    )


ITEMSIZE = {"bool": 1, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "f16": 2, "bf16": 2, "i32": 4,
            "u32": 4, "f32": 4, "i64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}  # fmt: skip
AVAL = re.compile(r"^(?P<dtype>\w+)\[(?P<shape>[^\]]*)\]")


def saved_bytes(fn: Callable, args: tuple, per_device: bool = False) -> int:
    """The bytes of what JAX saves for the backward pass, every line
    `jax.ad_checkpoint.print_saved_residuals` prints (device and host); a
    sharded dimension (`8@data`) counts whole, or with `per_device` its one
    device's share (divided by its mesh axes' sizes, read off `args`)."""
    import contextlib
    import io

    import jax.ad_checkpoint  # a submodule: `import jax` alone does not load it

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        jax.ad_checkpoint.print_saved_residuals(fn, *args)
    axes = _mesh_axes(args) if per_device else {}
    total = 0
    for line in printed.getvalue().splitlines():
        aval = AVAL.match(line)
        assert aval, f"a line of print_saved_residuals the oracle cannot read: {line!r}"
        size = 1
        for dim in filter(None, aval["shape"].split(",")):
            length, _, sharded = dim.partition("@")
            size *= int(length)
            for axis in re.findall(r"\w+", sharded) if per_device else ():
                size //= axes[axis]
        total += size * ITEMSIZE[aval["dtype"]]
    return total


def _mesh_axes(args: tuple) -> dict[str, int]:
    """The sizes of the mesh axes the arguments are sharded over."""
    for leaf in jax.tree.leaves(args):
        mesh = getattr(getattr(leaf, "sharding", None), "mesh", None)
        if mesh is not None:
            return dict(mesh.shape)
    return {}


# ---- pasting a snippet ----------------------------------------------------------


class NotPasteable(Exception):
    """A snippet whose shape has no mechanical paste (said, not faked)."""


WRAPPERS = ("checkpoint", "remat", "filter_checkpoint")
HEADER = re.compile(r"^# (?P<file>[^\s:,]+\.py):(?P<line>\d+)\b")


@dataclass
class Pasted:
    function: Callable
    source: str  # the model's file with the snippet in place
    module: object = None  # the copy imported: its classes are the arguments' (Equinox)


def paste(snippet: str, model: Model) -> Pasted:
    """The model's target with `snippet` pasted as its words say: an outer
    `jax.checkpoint(NAME, policy=...)` around the target; a site's code at
    the line its header names, in place of the checkpoint call there (a
    `jax.checkpoint(...)` call, a library wrapper's `policy=`, or the
    function called directly); a policy function of the call's index
    defined at the end of the file. The copy is imported from a folder of
    its own and its target taken by name."""
    if "nested_scan(" in snippet or "split_scan(" in snippet:
        return _paste_structure(snippet, model)
    parts: list[str] = []
    for p in (p.strip("\n") for p in re.split(r"\n\s*\n", snippet) if p.strip()):
        if p.startswith("# and where") and parts:  # the call of a policy function above
            parts[-1] += "\n" + p
        else:
            parts.append(p)
    defs, edits, around = [], [], None
    for part in parts:
        lines = part.splitlines()
        code = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        header = HEADER.match(lines[0])
        if not lines[0].startswith("#") or lines[0].startswith("# around "):
            around = code[-1]  # the outer policy, around the target
            continue
        if header is None:
            raise NotPasteable(f"a part with no line to paste at: {lines[0]!r}")
        if os.path.basename(model.path) != header["file"]:
            raise NotPasteable(f"it names {header['file']}, not the model's file")
        if code and code[0].startswith("def "):  # a policy chosen by the call's index
            body = _until_blank_or_comment(lines)
            defs.append(body)
            code = [ln for ln in code if ln not in body.splitlines()]
        if not code:
            raise NotPasteable(f"no code after {lines[0]!r}")
        edits.append((int(header["line"]), code[-1].split("  #")[0].strip()))
    source = open(model.path, encoding="utf-8").read()
    source = _edit(source, edits)
    if defs:
        source += "\n\n# pasted from the snippet\n" + "\n\n".join(defs) + "\n"
    module = _import_module(source, model)
    fn = getattr(module, model.target)
    if around is not None:
        fn = _around(around, fn, model)
    return Pasted(fn, source, module)


STRUCTURE_CALL = re.compile(
    r"^#\s+carry, ys = (?P<helper>nested_scan|split_scan)\((?P<args>.*)\)$", re.M
)
STEP = re.compile(
    r"^# with (?P<name>step_first|step_rest) = (?P<code>.+?)(  \(as written\))?$", re.M
)
HELPER = "# The helper, defined once:"


def _paste_structure(snippet: str, model: Model) -> Pasted:
    """A structure's snippet pasted as its words say: the `jax.lax.scan(step,
    init, xs)` call on the line its header names replaced by the helper's
    call (nested_scan: with the snippet's keywords; split_scan: with its
    two steps as the `# with step_... = ...` lines write them), the helper
    defined at the end of the file."""
    header = HEADER.match(snippet)
    call = STRUCTURE_CALL.search(snippet)
    if header is None or call is None or HELPER not in snippet:
        raise NotPasteable("a structure snippet with no line, call or helper to paste")
    if os.path.basename(model.path) != header["file"]:
        raise NotPasteable(f"it names {header['file']}, not the model's file")
    source = open(model.path, encoding="utf-8").read()
    scans = [
        n for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Call) and n.lineno == int(header["line"])
        and ast.unparse(n.func).endswith("lax.scan")
    ]  # fmt: skip
    if len(scans) != 1 or len(scans[0].args) != 3:
        raise NotPasteable(f"line {header['line']} has no one jax.lax.scan(step, init, xs) call")
    (scan,) = scans
    step, init, xs = (ast.unparse(a) for a in scan.args)
    keywords = [a.strip() for a in call["args"].split(",")]
    if call["helper"] == "nested_scan":
        code = f"nested_scan({step}, {init}, {xs}, {', '.join(keywords[3:])})"
    else:
        steps = {m["name"]: m["code"] for m in STEP.finditer(snippet)}
        if set(steps) != {"step_first", "step_rest"}:
            raise NotPasteable(f"split steps not written as code: {sorted(steps)}")
        first, rest = steps["step_first"], steps["step_rest"]
        code = f"split_scan({first}, {rest}, {init}, {xs}, {', '.join(keywords[4:])})"
    lines = source.splitlines(keepends=True)
    start = sum(len(t) for t in lines[: scan.lineno - 1]) + scan.col_offset
    end = sum(len(t) for t in lines[: scan.end_lineno - 1]) + scan.end_col_offset
    source = source[:start] + code + source[end:]
    source += "\n\n# pasted from the snippet\n" + snippet.split(HELPER, 1)[1].strip() + "\n"
    module = _import_module(source, model)
    return Pasted(getattr(module, model.target), source, module)


def _until_blank_or_comment(lines: list[str]) -> str:
    """The `def` block of a part: from its `def` line to the line before the
    next comment at the margin."""
    start = next(i for i, ln in enumerate(lines) if ln.startswith("def "))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    return "\n".join(lines[start:end]).rstrip()


def _edit(source: str, edits: list[tuple[int, str]]) -> str:
    """`source` with each (line, code) applied to the checkpoint call on that line."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    starts = [0]
    for text in lines:
        starts.append(starts[-1] + len(text))

    def offset(line: int, col: int) -> int:  # ast's columns count UTF-8 bytes
        return starts[line - 1] + len(lines[line - 1].encode()[:col].decode())

    lines_edited = [line for line, _ in edits]
    twice = sorted({line for line in lines_edited if lines_edited.count(line) > 1})
    if twice:
        said = [code for line, code in edits if line in twice]
        raise NotPasteable(f"line {twice[0]} is given {len(said)} codes at once: {said}")
    replacements = []
    for line, code in edits:
        calls = [
            n for n in ast.walk(tree)
            if isinstance(n, ast.Call) and n.lineno == line
            and ast.unparse(n.func).rpartition(".")[2] in WRAPPERS
        ]  # fmt: skip
        if not calls and not code.startswith("policy="):
            # The line that calls the checkpointed function by a name bound
            # to it (`layer = jax.checkpoint(...)` elsewhere): the code goes
            # in place of that name, as `jax.checkpoint(f, policy=...)(x)`.
            named = [
                n.func for n in ast.walk(tree)
                if isinstance(n, ast.Call) and n.lineno == line and isinstance(n.func, ast.Name)
            ]  # fmt: skip
            # Or passes it to a scan by that name (`jax.lax.scan(layer, x, params)`).
            named = named or [
                n.args[0] for n in ast.walk(tree)
                if isinstance(n, ast.Call) and n.lineno == line and n.args
                and ast.unparse(n.func).endswith("lax.scan") and isinstance(n.args[0], ast.Name)
            ]  # fmt: skip
            if len(named) == 1:
                (name,) = named
                start = offset(name.lineno, name.col_offset)
                replacements.append((start, offset(name.end_lineno, name.end_col_offset), code))
                continue
        if len(calls) != 1:
            raise NotPasteable(f"line {line} has {len(calls)} checkpoint calls, not one")
        (call,) = calls
        start = offset(call.lineno, call.col_offset)
        end = offset(call.end_lineno, call.end_col_offset)
        if code.startswith("policy="):
            keyword = next((k for k in call.keywords if k.arg == "policy"), None)
            if keyword is not None:
                v = keyword.value
                start, end = offset(v.lineno, v.col_offset), offset(v.end_lineno, v.end_col_offset)
                replacements.append((start, end, code[len("policy=") :]))
            else:
                replacements.append((end - 1, end - 1, ", " + code))
        else:
            replacements.append((start, end, code))
    for start, end, text in sorted(replacements, reverse=True):
        source = source[:start] + text + source[end:]
    return source


_pasted = 0


def _import_module(source: str, model: Model) -> object:
    """`source` as the model's module, imported from a folder of its own."""
    global _pasted
    _pasted += 1
    folder = tempfile.mkdtemp(prefix="zoo-pasted-")
    path = os.path.join(folder, os.path.basename(model.path))
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(source)
    return import_as(f"zoo_pasted_{_pasted}", path)


def _around(code: str, fn: Callable, model: Model) -> Callable:
    """An outer snippet (`jax.checkpoint(NAME, policy=...)`, or NAME as
    written) evaluated with NAME the target."""
    names = {**_own_names(model), "jax": jax, model.target: fn}
    return eval(code.split("  #")[0].strip(), names)  # noqa: S307 (the tool's snippet)


def _own_names(model: Model) -> dict:
    """The module's top-level names, for a snippet that names the target's
    own policy."""
    module = load_module(model.path)
    return {k: v for k, v in vars(module).items() if not k.startswith("__")}
