"""Provides target loading (Contract 1): import a file, collect its targets.

A target file is imported as a fresh module from its path, with its folder on
`sys.path` during the import so it can import its neighbours.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from typing import TYPE_CHECKING, Any

from remat_tui import registry
from remat_tui.core.runtime.usercode import is_users
from remat_tui.core.setup.usererrors import describe, user_traceback
from remat_tui.errors import RematError
from remat_tui.registry import Target

if TYPE_CHECKING:
    import inspect

_module_ids = itertools.count()


def load_targets(path: str) -> dict[str, Target]:
    """Import the file at `path` and return its registered targets by name."""
    path = os.path.abspath(path)
    _require_readable(path)
    return _by_name(path, _import_collecting(path))


def _require_readable(path: str) -> None:
    """A missing or unreadable file said as such (an import would say only that
    it failed, with no frame of the user's)."""
    if not os.path.isfile(path):
        raise RematError(
            f"{path}: no such file. Give the path of a Python file that "
            "registers targets with @remat_tui.target(...)."
        )
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise RematError(
            f"{path}: cannot read the file ({exc.strerror}). Make it readable "
            f"(chmod u+r {os.path.basename(path)}) or run as a user who can read it."
        ) from None


def _import_collecting(path: str) -> list[Target]:
    """Import the file as a fresh module, its folder on `sys.path`, and return
    the targets it registered; what it raised said as the user's error."""
    spec = importlib.util.spec_from_file_location(f"remat_tui_target_{next(_module_ids)}", path)
    if spec is None or spec.loader is None:
        raise RematError(f"{path}: not a Python file remat-tui can import (expected a .py file).")
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(path)
    # The TPU environment is set before the user's module runs: a target that
    # builds its mesh from jax.devices() at import starts JAX's backends, and
    # libtpu, with no TPU here, would warn of hostnames and take its lock.
    importlib.import_module("remat_tui.core.setup.devices")
    collected: list[Target] = []
    saved_collector, registry._collector = registry._collector, collected
    sys.path.insert(0, folder)
    # Registered while it runs, as a normal import would be: dataclasses and
    # `from __future__ import annotations` look the module up by name.
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(spec.name, None)
        where = f"line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "")
        text = f"\n    {exc.text.rstrip()}" if exc.text else ""
        culprit = exc.filename if exc.filename and exc.filename != path else None
        blame = f"{path}: importing {culprit}: syntax error" if culprit else f"{path}: syntax error"
        raise RematError(f"{blame} at {where}: {exc.msg}{text}") from None
    except Exception as exc:  # the user's module raised: show their traceback
        sys.modules.pop(spec.name, None)
        raise RematError(
            f"{path}: importing the file raised an exception.\n"
            f"{user_traceback(exc) or describe(exc)}"
        ) from None
    finally:
        registry._collector = saved_collector
        if sys.path and sys.path[0] == folder:
            sys.path.pop(0)
    return collected


def _by_name(path: str, collected: list[Target]) -> dict[str, Target]:
    """The targets by name, each told its file; two of one name, or none, said."""
    targets: dict[str, Target] = {}
    for t in collected:
        if t.name in targets:
            raise RematError(
                f"{path}: two targets are named '{t.name}'; "
                "pass name='...' to remat_tui.target to tell them apart."
            )
        t.file = path
        targets[t.name] = t
    if not targets:
        raise RematError(
            f"{path}: the file registers no targets. Decorate a function with "
            "@remat_tui.target(args=lambda: (...)) to analyse it."
        )
    return targets


def split_target_ref(ref: str) -> tuple[str, str | None]:
    """`FILE[:NAME]` -> (FILE, NAME or None). A Windows drive colon is not a name."""
    head, sep, tail = ref.rpartition(":")
    if sep and head and tail and os.sep not in tail and not tail.endswith(".py"):
        return head, tail
    return ref, None


def pick_target(targets: dict[str, Target], name: str | None) -> Target | None:
    """The named target, the only target, or None when the user must choose."""
    if name is not None:
        if name not in targets:
            some = next(iter(targets.values()))
            raise RematError(
                f"{some.file}: no target named '{name}'. "
                f"Targets in this file: {', '.join(targets)}."
            )
        return targets[name]
    if len(targets) == 1:
        return next(iter(targets.values()))
    return None


def load_target(ref: str) -> Target:
    """Load `FILE[:NAME]`, demanding a name when the file has several targets."""
    path, name = split_target_ref(ref)
    targets = load_targets(path)
    chosen = pick_target(targets, name)
    if chosen is None:
        raise RematError(
            f"{os.path.abspath(path)} has {len(targets)} targets: "
            f"{', '.join(targets)}. Pick one with FILE:NAME, "
            f"e.g. {path}:{next(iter(targets))}."
        )
    return chosen


def resolve_arguments(
    t: Target, devices: list | None = None, batch: int | None = None
) -> tuple[tuple, dict]:
    """Call the target's args/kwargs factories, with clear errors when they fail.

    A factory that declares a parameter named `devices` (`args=lambda devices:
    ...`) is called with the devices a sharded target may span: the local
    devices of the chosen device's platform, or a TPU topology's chips
    (core.setup.devices.device_set); None here means JAX's local devices. It builds
    its own mesh from them, with its own axis names, shape and axis types:
    `jax.make_mesh((4,), ("data",), devices=devices)`.

    A factory that declares a parameter named `mesh` is called with the mesh
    the target asks for (`Target.mesh`: `--mesh data=4,model=2`, or `mesh=`
    in the API), made over those devices (`setup.meshes`); where none
    is asked, its default stands, and one without a default is an error
    saying how to ask.

    A factory that declares a parameter named `batch` builds the example at
    that batch size (Contract 10: fit grows it, `setup.scaling`); with
    `batch` None it is left to the parameter's default, the example's batch,
    and a `batch` without a default is an error saying so.
    """
    return (
        _resolve(t, t.args, "args", tuple, (), devices, batch),
        _resolve(t, t.kwargs, "kwargs", dict, {}, devices, batch),
    )


def verify_arguments(t: Target, devices: list | None = None) -> tuple[tuple, dict]:
    """The (args, kwargs) `verify` runs the step with: the target's
    `verify_args` in place of its `args` where it gives them (Contract 18),
    else `resolve_arguments`'."""
    if t.verify_args is None:
        return resolve_arguments(t, devices)
    return (
        _resolve(t, t.verify_args, "verify_args", tuple, (), devices),
        _resolve(t, t.kwargs, "kwargs", dict, {}, devices),
    )


def takes_devices(t: Target) -> bool:
    """Whether the target's example arguments depend on the device set (a
    factory with a `devices` parameter): then they are built per device set."""
    return any(_wants_devices(v) for v in (t.args, t.kwargs))


def _wants_devices(factory: object) -> bool:
    """A factory whose example depends on the device set: it takes the devices,
    or a mesh made over them."""
    return any(factory_parameter(factory, name) is not None for name in ("devices", "mesh"))


def factory_parameter(factory: object, name: str) -> inspect.Parameter | None:
    """The `inspect.Parameter` called `name` of an args/kwargs factory, or None
    (not a callable, no such parameter, or no signature to read)."""
    import inspect

    if not callable(factory):
        return None
    try:
        return inspect.signature(factory).parameters.get(name)
    except (TypeError, ValueError):  # a builtin without a signature
        return None


def _resolve(
    t: Target,
    value: Any,
    what: str,
    kind: type,
    empty: Any,
    devices: list | None = None,
    batch: int | None = None,
) -> Any:
    if value is None:
        return empty
    if callable(value):
        given: dict[str, Any] = {}
        if _wants_devices(value) and devices is None:
            import jax

            devices = jax.devices()
        if factory_parameter(value, "devices") is not None:
            given["devices"] = list(devices or [])
        mesh_parameter = factory_parameter(value, "mesh")
        if mesh_parameter is not None:
            given |= _mesh_given(t, what, mesh_parameter, devices)
        batch_parameter = factory_parameter(value, "batch")
        if batch_parameter is not None and batch is not None:
            given["batch"] = batch
        elif batch_parameter is not None and batch_parameter.default is batch_parameter.empty:
            raise RematError(
                f"{t.label}: the {what} factory's `batch` parameter has no default, so there "
                "is no example batch to analyse. Give it the example's batch as its default, "
                f"e.g. {what}=lambda batch=32: ...; fit alone builds it at other batches."
            )
        try:
            value = value(**given)
        except Exception as exc:
            raise RematError(
                f"{t.label}: the {what} factory raised an exception.\n{user_traceback(exc)}"
            ) from None
    if kind is tuple and isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, kind):
        raise RematError(
            f"{t.label}: {what} must be a {kind.__name__} (or a zero-argument "
            f"callable returning one), got {type(value).__name__}."
        )
    return value


def _mesh_given(
    t: Target, what: str, parameter: inspect.Parameter, devices: list | None
) -> dict[str, Any]:
    """The `mesh` a factory is called with: the one the target asks for, made
    over `devices`; none where none is asked and the parameter has a default."""
    from remat_tui.core.setup.meshes import MESH_EXAMPLE, build_mesh

    if t.mesh is not None:
        return {"mesh": build_mesh(t.mesh, devices or [], t.label)}
    if parameter.default is not parameter.empty:
        return {}
    raise RematError(
        f"{t.label}: the {what} factory takes a `mesh` and none was asked for. Say the mesh "
        f"to build over the chosen devices: {MESH_EXAMPLE} (mesh='data=4,model=2' in the "
        "API), or give the parameter a default."
    )


def takes_mesh(t: Target) -> bool:
    """Whether one of the target's factories takes a `mesh` (what --mesh builds)."""
    return any(factory_parameter(v, "mesh") is not None for v in (t.args, t.kwargs))


def with_mesh(t: Target, mesh: str | tuple | None, devices: list | None = None) -> Target:
    """`t` asking for `mesh` (`"data=4,model=2"`, or its axes), checked: a
    target none of whose factories takes a `mesh` cannot be given one, nor a
    mesh of another number of devices than `devices` (the chosen set) holds."""
    from dataclasses import replace

    from remat_tui.core.setup.meshes import MESH_EXAMPLE, mesh_words, parse_mesh, require_devices

    if mesh is None:
        return t
    axes = parse_mesh(mesh) if isinstance(mesh, str) else tuple(mesh)
    if not takes_mesh(t):
        raise RematError(
            f"{t.label}: the mesh {mesh_words(axes)} was asked for, and no factory of the target "
            "takes a `mesh` to build its example over. Write args=lambda mesh: ... (the "
            f"mesh is made over the chosen devices), or drop {MESH_EXAMPLE.split()[0]}."
        )
    if devices is not None:
        require_devices(axes, devices, t.label)
    return replace(t, mesh=axes)


def _local(folder: str) -> dict[str, str]:
    """Modules in sys.modules whose file lies under `folder`: {name: file}. Paths
    are resolved only for the few under the folder (resolving every module's
    costs tens of milliseconds per reload)."""
    inside = tuple({os.path.join(folder, ""), os.path.join(os.path.realpath(folder), "")})
    found = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file or not file.startswith(inside):
            continue
        file = os.path.realpath(file)
        if is_users(file):
            found[name] = file
    return found


def import_targets(path: str) -> tuple[dict | None, str | None, tuple[str, ...]]:
    """Import the target file afresh, its local modules too (they are dropped
    from sys.modules first, or the import would reuse them). Returns (targets or
    None, the error or None, the files to watch: the target and local modules)."""
    path = os.path.realpath(path)
    folder = os.path.dirname(path)
    for name in _local(folder):
        sys.modules.pop(name, None)
    targets, error = None, None
    try:
        targets = load_targets(path)
    except RematError as exc:
        error = exc.message
    watched = tuple(sorted({path, *_local(folder).values()}))
    return targets, error, watched
