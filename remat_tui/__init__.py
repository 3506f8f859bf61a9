"""remat-tui: see what JAX autodiff saves for the backward pass.

The package root stays light: importing it loads neither jax nor textual nor
the widget stack, so `remat-tui --help` and a target file's `import remat_tui`
are instant. The heavy entry points (`load_targets`, `analyze`, ...) import
the core on first call, and the displays of their results (notebook/hooks.py:
HTML in notebooks, rich in terminals).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from remat_tui.core.setup.config import RUNS  # light: no jax (see config.py)
from remat_tui.errors import RematError
from remat_tui.registry import Target, target
from remat_tui.version import __version__

if TYPE_CHECKING:  # the package root imports none of them (see above)
    from remat_tui.core.model import Analysis
    from remat_tui.core.search.compare import Comparison
    from remat_tui.core.search.diff import Diff
    from remat_tui.core.search.exact.search import Narrowing
    from remat_tui.core.search.fit.results import Fit
    from remat_tui.core.search.suggest.pipeline import Suggestion
    from remat_tui.core.xla.verify.runs import Verification
    from remat_tui.notebook.widget import RematWidget

__all__ = [
    "RematError",
    "Target",
    "__version__",
    "analyze",
    "calibrate_cpu",
    "compare",
    "diff",
    "fit",
    "load_targets",
    "show",
    "suggest",
    "target",
    "verify",
    "widget",
]


def _displays() -> None:
    """Give the results their displays (notebook/hooks.py; see core/display.py)."""
    from remat_tui.notebook import hooks  # noqa: F401


def _meshed(
    fn: Target | Callable,
    args: tuple | None,
    kwargs: dict | None,
    mesh: str | None,
    device: str | None,
) -> tuple[Target | Callable, tuple | None, dict | None]:
    """`fn` (made a Target) asking for `mesh` over `device`'s device set; as given without one."""
    if mesh is None:
        return fn, args, kwargs
    from remat_tui.core.setup.devices import device_set, resolve_device
    from remat_tui.core.setup.loading import with_mesh
    from remat_tui.core.trace.configured import as_target

    devices = device_set(resolve_device(device))
    return with_mesh(as_target(fn, args, kwargs), mesh, devices), None, None


def load_targets(path: str) -> dict[str, Target]:
    """Import the target file at `path` and return its targets by name.

    The file is imported as a module from its path, its folder on `sys.path`
    during the import; its `@remat_tui.target` registrations are collected.

    Args:
        path: a Python file that registers targets with `@remat_tui.target`.

    Returns:
        `{name: Target}`, in the order the file registers them.

    Raises:
        RematError: the file is missing, registers no target or two of one
            name, or raises when imported (the message names the file and the
            cause).
    """
    from remat_tui.core.setup.loading import load_targets as _load

    return _load(path)


def analyze(
    fn: Target | Callable,
    args: tuple | None = None,
    kwargs: dict | None = None,
    policy: str = "as_written",
    device: str | None = None,
    sites: dict[int | str, str] | None = None,
    compiled: bool = False,
    measure: bool = False,
    runs: int = RUNS,
    vs_written: bool = False,
    structure: str | None = None,
    mesh: str | None = None,
    verify: bool = False,
) -> Analysis:
    """Analyse what `fn` saves for the backward pass under one configuration.

    Traces the forward and backward passes of `jax.vjp` and lists the saved
    residuals as `jax.ad_checkpoint.print_saved_residuals` prints them, with
    their bytes, origins, the checkpoint sites, the FLOPs and both jaxprs.

    Args:
        fn: a `Target`, or a plain callable analysed with `args` and `kwargs`.
        args: the example arguments of a plain callable (arrays or
            `jax.ShapeDtypeStruct`s); ignored for a `Target`.
        kwargs: its keyword arguments, likewise.
        policy: the outer policy, written as after `jax.checkpoint_policies.`
            (`"dots_saveable"`, `"save_only_these_names('a')"`), or the name of
            one of the target's own policies; `"as_written"` analyses the code
            as it is, with no outer `jax.checkpoint`.
        device: `"cpu:0"`, `"tpu:v5e:2x2"`, ...; JAX's default device if None.
        sites: `{site id or checkpointed function name: spec}`, overriding the
            policies of the `jax.checkpoint`s written in the code;
            `"as_written"` at a site removes that checkpoint.
        compiled: also compile the step (the training step, or the gradient
            keeping the loss) for `device`, never running it: sets
            `analysis.compiled` and the step-time estimate `analysis.time`.
        measure: also run the compiled step on `device` (a local device) and
            time it: sets `analysis.measured`. Implies `compiled`.
        runs: timed runs when measuring, after one warm-up.
        vs_written: with `compiled`, also compile the code as written, and say
            in `analysis.compiled.memory["explanation"]` why the peak moved so
            much less than the residual bytes against it, where it did (one
            more compile; without it, one program is compiled).
        structure: a scan of the code rebuilt, `"nested(4)"` (its layers as
            4 checkpointed groups) or `"split(8, everything_saveable,
            nothing_saveable)"` (its first 8 layers under one policy, the
            rest under another); `analysis.python` is then the code to write.
        mesh: the mesh to build over `device`'s device set for an args
            factory's parameter named `mesh` (`"data=4,model=2"`, its sizes
            multiplying to the number of devices), as `--mesh` does.
        verify: also run the step under this configuration and as the code
            is written on `device` with the same inputs, as `verify` does:
            sets `analysis.gradients` (a `Verification`).

    Returns:
        An `Analysis`; its `to_dict()` is the JSON report.

    Raises:
        RematError: bad input (an unknown policy or device, a target that
            fails to trace, a compile that fails other than for memory).
    """
    from remat_tui.core.trace.configured import as_target

    fn, args, kwargs = _meshed(fn, args, kwargs, mesh, device)
    config = None
    target = as_target(fn, args, kwargs) if structure is not None or verify else None
    if target is not None:
        fn, args, kwargs = target, None, None
    if structure is not None:
        from remat_tui.core.setup.config import Config

        assert target is not None
        config = Config.make(policy, sites, device, target.policies, structure)
    _displays()
    if compiled or measure:
        from remat_tui.core.xla.compiled_analysis import analyze_compiled
        from remat_tui.core.xla.run.shared_runs import sharing

        with sharing(verify):  # the measure's first run is verify's
            analysis = analyze_compiled(
                fn, args, kwargs, policy=policy, device=device, sites=sites, config=config,
                measure=measure, runs=runs, vs_written=vs_written,
            )  # fmt: skip
    else:
        from remat_tui.core.trace.analysis import analyze as _analyze

        analysis = _analyze(fn, args, kwargs, policy=policy, device=device, sites=sites,
                            config=config)  # fmt: skip
    if not verify or target is None:
        return analysis
    from dataclasses import replace

    from remat_tui.core.xla.verify.runs import verify as _verify

    return replace(analysis, gradients=_verify(target, analysis.config))


def compare(
    fn: Target | Callable,
    args: tuple | None = None,
    kwargs: dict | None = None,
    policies: list[str] | None = None,
    sites: dict[int | str, str] | None = None,
    compiled: bool = False,
    device: str | None = None,
    measure: bool = False,
    runs: int = RUNS,
    skip: list[str] | None = None,
    mesh: str | None = None,
    verify: bool = False,
) -> Comparison:
    """Rows of costs, one per configuration, Pareto-optimal ones marked.

    Args:
        fn: a `Target`, or a plain callable analysed with `args` and `kwargs`.
        args: the example arguments of a plain callable.
        kwargs: its keyword arguments.
        policies: outer policy specs to compare; by default every
            configuration worth comparing: the built-in policies and the
            target's own, the `checkpoint_name` save and offload sets, and in
            code with checkpoint sites each of those at each checkpointed
            function, and the structures of its scans (`nested(G)`,
            `split(K, a, b)`: see `analyze`).
        sites: site overrides every row starts from (as in `analyze`).
        compiled: compile each row's step for `device`: rows then weigh the
            compiled peak and rank by the estimated step time.
        device: as in `analyze`.
        measure: also run each compiled step on `device` `runs` times; rows
            then rank by the measured time. Implies `compiled`.
        runs: timed runs per row when measuring, after one warm-up.
        skip: candidates to leave out: `"SPEC"` (that policy anywhere) or
            `"ID=SPEC"` / `"FUNCTION=SPEC"` (at that checkpoint); never the
            code as written. A candidate JAX refuses to trace is a row with
            its error (`refused`) either way.
        mesh: the mesh to build over `device`'s device set for an args
            factory's parameter named `mesh` (`"data=4,model=2"`, its sizes
            multiplying to the number of devices), as `--mesh` does.
        verify: also run each row's step (each that JAX traced) against the
            code as written's on `device`, as `verify` does: sets each
            row's `gradients` (the JSON's); a row whose gradients differ is
            never Pareto-optimal.

    Returns:
        A `Comparison`, whose `rows` are `Row`s.
    """
    from remat_tui.core.search.compare import compare as _compare

    fn, args, kwargs = _meshed(fn, args, kwargs, mesh, device)
    _displays()
    return _compare(
        fn,
        args,
        kwargs,
        policies=policies,
        sites=sites,
        compiled=compiled,
        device=device,
        measure=measure,
        runs=runs,
        skip=skip,
        verify=verify,
    )


def suggest(
    fn: Target | Callable,
    budget: int | str,
    args: tuple | None = None,
    kwargs: dict | None = None,
    compiled: bool = False,
    device: str | None = None,
    sites: dict[int | str, str] | None = None,
    measure: bool = False,
    runs: int = RUNS,
    narrowing: Callable[[Narrowing], object] | None = None,
    cancelled: Callable[[], bool] | None = None,
    skip: list[str] | None = None,
    mesh: str | None = None,
    verify: bool = False,
) -> Suggestion:
    """The least-cost configuration whose memory fits a budget, with what it
    is proven against.

    Searches the built-in policies and the target's own (around the whole
    function, and at each checkpointed function), every
    save/offload/recompute assignment of its `checkpoint_name`s at each
    checkpointed function (at each call, where a Python loop calls one
    several times; with no names, a whole policy per call), and the
    structures of its scans (`nested(G)`,
    `split(K, a, b)` at every eighth of the layers: see `analyze`). The
    whole space, whatever its size: every configuration of a small one; a
    larger one by a model of each decision's memory and cost, solved exactly
    and corrected by compiling its answer (`search` says the bound, the gap,
    the compiles and what the model assumes: a gap of 0 is a proof within
    the model).

    Args:
        fn: a `Target`, or a plain callable analysed with `args` and `kwargs`.
        budget: bytes, or a size such as `"2GiB"`, `"512MiB"`, `"1.5e9"`.
        args: the example arguments of a plain callable.
        kwargs: its keyword arguments.
        compiled: weigh the compiled peak per device instead of the residual
            bytes, and rank by the estimated step time; only the candidates
            that can change the answer are compiled.
        device: as in `analyze`.
        sites: site overrides the search starts from (as in `analyze`).
        measure: also run each compiled candidate that fits on `device`, and
            choose the fastest measured. Implies `compiled`.
        runs: timed runs per candidate when measuring, after one warm-up.
        narrowing: called with the exact search's bound, best and gap
            (`.bound`, `.best`, `.gap`, `.compiles`) as they narrow.
        cancelled: polled between compiles; once it returns True the search
            stops and the best answer verified so far is returned
            (`cancelled` set, `search.gap` what is left).
        skip: candidates to leave out, as in `compare`.
        mesh: the mesh to build over `device`'s device set for an args
            factory's parameter named `mesh` (`"data=4,model=2"`, its sizes
            multiplying to the number of devices), as `--mesh` does.
        verify: run the answer's step and the code as written's on `device`
            with the same inputs, as `verify` does; an answer whose
            gradients differ is dropped for the next best (`verify_failed`
            says which and why; `gradients` is the answer's verification).

    Returns:
        A `Suggestion`: `best` is the answer (the smallest when nothing
        fits), `best.python` the code to paste, `exact` whether it is proven
        optimal (within the model), `search` what it is proven against.
    """
    from remat_tui.core.search.suggest.pipeline import suggest as _suggest
    from remat_tui.core.units import parse_size

    budget = parse_size(budget) if isinstance(budget, str) else budget
    fn, args, kwargs = _meshed(fn, args, kwargs, mesh, device)
    _displays()
    return _suggest(
        fn, budget, args, kwargs, compiled=compiled, device=device, sites=sites,
        measure=measure, runs=runs, narrowing=narrowing, cancelled=cancelled, skip=skip,
        verify=verify,
    )  # fmt: skip


def diff(
    fn: Target | Callable,
    a: str = "as_written",
    b: str = "as_written",
    args: tuple | None = None,
    kwargs: dict | None = None,
    sites_a: dict[int | str, str] | None = None,
    sites_b: dict[int | str, str] | None = None,
) -> Diff:
    """What configuration A saves that configuration B does not, and back.

    Args:
        fn: a `Target`, or a plain callable analysed with `args` and `kwargs`.
        a: side A's outer policy spec.
        b: side B's outer policy spec.
        args: the example arguments of a plain callable.
        kwargs: its keyword arguments.
        sites_a: side A's site overrides (as in `analyze`).
        sites_b: side B's site overrides.

    Returns:
        A `Diff`: the residuals only in A, only in B and in both, and the
        deltas B - A.
    """
    from remat_tui.core.search.diff import diff as _diff
    from remat_tui.core.setup.config import Config
    from remat_tui.core.trace.configured import as_target

    target = as_target(fn, args, kwargs)
    first = Config.make(a, sites_a, declared=target.policies)
    second = Config.make(b, sites_b, declared=target.policies)
    _displays()
    return _diff(target, first, second)


def calibrate_cpu() -> dict:
    """Measure this CPU's rates again and keep them as its calibration.

    The step-time estimate on the CPU uses rates measured once per machine
    (a matmul, a memory-bound update, transcendentals, a step of almost no
    work) and kept in remat-tui's cache folder
    (`$XDG_CACHE_HOME/remat-tui/cpu-rates.json`, else
    `~/.cache/remat-tui/cpu-rates.json`), so that the same program gets the
    same estimate run after run. Calibrate again after a change of machine
    load you want reflected, or a hardware change the key does not see (the
    key is the CPU's model, its cores and the jax and jaxlib versions). The
    CLI's `--recalibrate` does the same. Takes a second or two.

    Returns:
        The calibration, as estimates report it in `time["rates"]`: `source`
        in words, `calibrated_at`, `method`, `machine`, `file` (None where
        it could not be written, and `source` says why) and the rates.
    """
    from remat_tui.core.xla.estimates.chips import recalibrate_cpu

    return recalibrate_cpu().rates_source()


def show(f: Target | Callable, *args: Any, **kwargs: Any) -> None:
    """Display what `f(*args, **kwargs)` saves for the backward pass.

    The saved residuals as `print_saved_residuals` words them, with their
    bytes and where each was computed, the totals, and the forward and
    backward jaxprs side by side, residuals highlighted. `f` is analysed as
    written: a function wrapped in `jax.checkpoint(..., policy=...)` shows
    that policy. A drop-in for JAX's notebook helper `print_fwd_bwd`: HTML in
    a notebook, printed with rich in a terminal. Returns None.
    """
    from remat_tui.notebook.show import show as _show

    _show(f, *args, **kwargs)


def widget(f: Target | Callable, *args: Any, **kwargs: Any) -> RematWidget:
    """A live notebook view of `f(*args, **kwargs)`.

    Pick a policy (or type any spec), save, recompute or offload each
    `checkpoint_name`, pick a device, and the display of `show` follows,
    traced in a background thread. From Python: `w.policy =
    "dots_saveable"; w.wait(); w.analysis`. Needs the `notebook` extra
    (anywidget).

    Returns:
        The widget; as a cell's last line, it displays itself.
    """
    from remat_tui.notebook.widget import widget as _widget

    return _widget(f, *args, **kwargs)


def fit(
    fn: Target | Callable,
    budget: int | str,
    args: tuple | None = None,
    kwargs: dict | None = None,
    policies: list[str] | None = None,
    sites: dict[int | str, str] | None = None,
    device: str | None = None,
    multiple: int = 1,
    max_batch: int | None = None,
    measure: bool = False,
    runs: int = RUNS,
    optimize: bool = False,
    skip: list[str] | None = None,
    mesh: str | None = None,
    verify: bool = False,
) -> Fit:
    """How big a batch fits: per configuration, the largest batch whose
    compiled step fits a budget, and its examples per second.

    The target must scale: its `args` (or `kwargs`) factory takes a parameter
    named `batch`, whose default is the example's batch
    (`args=lambda batch=32: ...`). Each configuration's search starts there
    and ends at a batch that fits beside the next multiple that does not.

    Args:
        fn: a `Target`, or a plain callable analysed with `args` and `kwargs`.
        budget: bytes per device, or a size such as `"16GiB"`.
        args: the example arguments' factory of a plain callable (taking `batch`).
        kwargs: its keyword arguments (or their factory).
        policies: outer policy specs to search, each row named as written;
            default: every configuration `compare` weighs.
        sites: site overrides every configuration starts from (as in `analyze`).
        device: as in `analyze`; TPU topologies compile ahead of time.
        multiple: try batches in steps of this many.
        max_batch: the largest batch to try.
        measure: also run each row's step at its batch on `device`; measured
            times then rank.
        runs: timed runs per row when measuring, after one warm-up.
        optimize: instead of a row per configuration, a row per batch size
            tried, each with the best decisions under the budget at that
            batch (suggest's exact search, compiled), ranked by examples
            per second. Not with `policies`.
        skip: candidates to leave out, as in `compare`.
        mesh: the mesh to build over `device`'s device set for an args
            factory's parameter named `mesh` (`"data=4,model=2"`, its sizes
            multiplying to the number of devices), as `--mesh` does.
        verify: with `optimize`, run each batch's answer against the code
            as written on `device`, as `suggest(verify=True)` does: one
            whose gradients differ is dropped for the next best (each row's
            `gradients` and `verify_failed`).

    Returns:
        A `Fit`: `rows` best first (`batch`, `peak_bytes`, `step_seconds`,
        `examples_per_second`), `best`, `to_dict()` for the JSON.
    """
    from remat_tui.core.search.fit.batches import fit as _fit
    from remat_tui.core.units import parse_size

    budget = parse_size(budget) if isinstance(budget, str) else budget
    fn, args, kwargs = _meshed(fn, args, kwargs, mesh, device)
    _displays()
    return _fit(
        fn, budget, args, kwargs, policies=policies, sites=sites, device=device,
        multiple=multiple, max_batch=max_batch, measure=measure, runs=runs, optimize=optimize,
        skip=skip, verify=verify,
    )  # fmt: skip


def verify(
    fn: Target | Callable,
    args: tuple | None = None,
    kwargs: dict | None = None,
    policy: str = "as_written",
    sites: dict[int | str, str] | None = None,
    device: str | None = None,
    structure: str | None = None,
    seed: int = 0,
    mesh: str | None = None,
    explain: bool = True,
) -> Verification:
    """Whether a configuration computes what the code as written computes:
    the same loss and gradients, run on the device.

    Compiles the step (the loss and its gradient, or the target's training
    step) under the configuration and as the code is written, runs both on
    `device` with the same inputs (the target's `verify_args`, else its
    example arrays, and for each `jax.ShapeDtypeStruct` random values drawn
    from `seed`, the same for both runs), and compares the loss and every
    gradient leaf (for a training step, the loss and the new parameters):
    bitwise, and against a tolerance from the dtype and from the code as
    written compiled a second time with XLA's backend optimisations off
    (see the docs' "Verify" page for the rule). It proves these values on
    these inputs on this device with this JAX; not other inputs or devices.

    Args:
        fn: a `Target`, or a plain callable analysed with `args` and `kwargs`.
        args: the example arguments of a plain callable.
        kwargs: its keyword arguments.
        policy: the outer policy, as in `analyze`.
        sites: site overrides, as in `analyze`.
        device: as in `analyze`; it must be able to run a step (a deviceless
            TPU topology cannot: the verdict is then `"not_run"`).
        structure: a scan of the code rebuilt, as in `analyze`.
        seed: the seed of the random inputs.
        mesh: the mesh to build over `device`'s device set for an args
            factory's parameter named `mesh`, as in `analyze`.
        explain: name the decisions the configuration makes against the
            code as written and, where the gradients differ, find the
            fewest that move them by verifying subsets of them (a few
            verifies more: about log2 of the decisions for each needed).

    Returns:
        A `Verification`: `verdict` (`"equal"`, `"agree"`, `"differ"` or
        `"not_run"` with `reason`), `ok`, `leaves` (each with `path`,
        `bitwise`, `max_abs`, `max_rel`, `tolerance`), `differing`,
        `decisions` and `culprit` (with `explain`: the fewest decisions
        that move the gradients, and `line`, that in one sentence), and
        `to_dict()`, the JSON's `gradients`.

    Raises:
        RematError: bad input, or a compile or run that fails.
    """
    from remat_tui.core.setup.config import Config
    from remat_tui.core.trace.configured import as_target
    from remat_tui.core.xla.verify.bisect import verify_explained
    from remat_tui.core.xla.verify.runs import verify as _verify

    fn, args, kwargs = _meshed(fn, args, kwargs, mesh, device)
    target = as_target(fn, args, kwargs)
    config = Config.make(policy, sites, device, target.policies, structure)
    _displays()
    if explain:
        return verify_explained(target, config, seed=seed)
    return _verify(target, config, seed=seed)
