"""Provides `widget(f, *args, **kwargs)`: a live notebook view of one function,
an anywidget (the `notebook` extra). Its state is synced traitlets:

- `policy` (a spec, Contract 2), picked from `policy_choices` or typed;
- `name_states`, {checkpoint_name: "recompute" | "save" | "offload"} for the
  `names` the function defines: changing one composes the policy that saves
  and offloads them (`save_only_these_names` or
  `save_and_offload_only_these_names`), as the app's Names list does without
  sites; picking a policy sets the states it implies for the function's own
  names (none, for a policy that does not decide by name);
- `device`, picked from `device_choices` (local devices, TPU topologies
  with the tpu extra);
- out: `html` (what `show` displays), `status`, `busy`, `error`.

Bad input (a spec that does not parse, a state or name that is not one, a
device there is not) is refused: `error` says why, and the controls go back
to the latest request, so neither the picker nor `w.policy` keeps it; a trace
that fails puts them back to the analysis still shown.

The function as written is analysed at once, as `show` does. Each change
after that is answered by Live (live.py): at once when seen before, else in
a background thread while the kernel runs other cells; the view shows the
request and its elapsed time meanwhile. Python can drive it too
(`w.policy = "dots_saveable"; w.wait()`), and `w.analysis` is the Analysis
shown. Where the widget's script cannot run (GitHub, nbconvert, a notebook
reopened without its kernel) a static copy of the HTML shown when it was
displayed stands beside it (`_ipython_display_`).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import anywidget
import traitlets

from remat_tui.core.model import Analysis
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import available_devices
from remat_tui.core.trace.configured import as_target
from remat_tui.errors import RematError
from remat_tui.notebook import analysis_html, hooks  # noqa: F401 (hooks: results display)
from remat_tui.notebook.live import Live, Shown
from remat_tui.notebook.show import require_function
from remat_tui.registry import Target

STATES = ("recompute", "save", "offload")


def widget(f: Target | Callable, *args: Any, **kwargs: Any) -> RematWidget:
    """The live view of `f(*args, **kwargs)` (or of a Target, given alone)."""
    require_function(f, "widget")
    if isinstance(f, Target) and not args and not kwargs:
        return RematWidget(f)
    return RematWidget(as_target(f, args, kwargs))


def states_of(spec: policies.PolicySpec, names: list[str]) -> dict[str, str]:
    """What the policy's names part (policies.names_part: the policy itself,
    or the names half of a save_from_both_policies) does to each of `names`
    (the function's own: a name it does not define is the analysis's
    warning, never a toggle's state, so the next toggle composes none of
    it); {} where nothing is decided by name."""
    named = policies.names_part(spec)
    if named is None:
        return {}
    spec = named
    states = {name: "recompute" for name in names}
    states.update({name: "save" for name in spec.names if name in states})
    states.update({name: "offload" for name in spec.offloaded if name in states})
    return states


class RematWidget(anywidget.AnyWidget):
    _esm = pathlib.Path(__file__).with_name("widget.js")
    _css = pathlib.Path(__file__).with_name("widget.css")

    policy = traitlets.Unicode(policies.AS_WRITTEN).tag(sync=True)
    policy_choices = traitlets.List(traitlets.Unicode()).tag(sync=True)
    names = traitlets.List(traitlets.Unicode()).tag(sync=True)
    name_states = traitlets.Dict().tag(sync=True)
    device = traitlets.Unicode("").tag(sync=True)
    device_choices = traitlets.List(traitlets.Unicode()).tag(sync=True)
    html = traitlets.Unicode("").tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)
    busy = traitlets.Bool(False).tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)

    def __init__(self, target: Target):
        self.target = target
        self.analysis: Analysis | None = None  # the Analysis shown
        self._composing = False  # set while a change of one control sets another
        # the controls (policy, name_states, device) of the latest request made,
        # and of each config asked for: what bad input or a failed trace restores
        self._accepted: tuple | None = None
        # `policy` (text, synced with the page) parsed once per spelling
        self._parsed: tuple[str | None, policies.PolicySpec | None] = (None, None)
        self._controls: dict[Config, tuple] = {}
        self.live = Live(target, analysis_html.render, self._show, self._fail)
        devices = available_devices()
        self._composing = True  # the initial values ask for nothing: one request follows
        super().__init__(
            policy_choices=[*policies.builtin_specs(), *target.policies],
            device_choices=devices,
            device=devices[0] if devices else "",
        )
        self._composing = False
        self._request()
        self.wait(None)  # the code as written, at once, as `show` shows it
        if self.analysis is None:
            raise RematError(self.error)

    def wait(self, timeout: float | None = 120) -> bool:
        """Block until the latest change is answered; False on timeout."""
        return self.live.wait(timeout)

    # ---- what the user changes ------------------------------------------------------------

    @traitlets.observe("policy")
    def _policy_changed(self, change: dict) -> None:
        if self._composing:
            return
        try:
            spec = self._policy_spec()
        except RematError as exc:
            self._refuse(exc.message)
            return
        self._set_quietly(name_states=states_of(spec, self.names))
        self._request()

    @traitlets.observe("name_states")
    def _names_changed(self, change: dict) -> None:
        if self._composing:
            return
        states = change["new"]
        bad = {n: s for n, s in states.items() if s not in STATES}
        unknown = sorted(set(states) - set(self.names))
        if bad or unknown:
            self._refuse(
                f"name states {bad}: expected one of {', '.join(STATES)}"
                if bad
                else f"no checkpoint_name {', '.join(map(repr, unknown))} in this function "
                f"(its names: {', '.join(self.names) or 'none'})"
            )
            return
        saved = [n for n, s in states.items() if s == "save"]
        offloaded = [n for n, s in states.items() if s == "offload"]
        # Only the names part changes: save_from_both_policies(dots_saveable, ...)
        # keeps its dots (the app's toggle does the same).
        try:
            around = self._policy_spec()
        except RematError:
            around = None
        spec = policies.with_names(around, policies.names_policy(saved, offloaded))
        self._parsed = (spec.canonical, spec)
        self._set_quietly(policy=spec.canonical)
        self._request()

    @traitlets.observe("device")
    def _device_changed(self, change: dict) -> None:
        if not self._composing:
            self._request()

    def _policy_spec(self) -> policies.PolicySpec:
        """The policy the user gave (`policy`), parsed once per spelling."""
        text, spec = self._parsed
        if text != self.policy or spec is None:
            spec = policies.parse(self.policy, self.target.policies)
            self._parsed = (self.policy, spec)
        return spec

    def _set_quietly(self, **values: Any) -> None:
        """Set traits without their observers asking for another analysis."""
        self._composing = True
        try:
            for name, value in values.items():
                setattr(self, name, value)
        finally:
            self._composing = False

    def _controls_now(self) -> tuple:
        return self.policy, dict(self.name_states), self.device

    def _restore(self, controls: tuple | None) -> None:
        """Put the controls back as they were for `controls`' request."""
        if controls is not None:
            policy, states, device = controls
            self._set_quietly(policy=policy, name_states=states, device=device)

    def _refuse(self, message: str) -> None:
        """Bad input: said in place; the controls (the picker, `w.policy`)
        go back to the latest request, and its analysis stays shown."""
        with self.hold_sync():
            self._restore(self._accepted)
            self.error = message

    def _request(self) -> None:
        try:
            config = Config.make(self._policy_spec(), None, self.device or None)
        except RematError as exc:
            self._refuse(exc.message)
            return
        self.error = ""
        self._accepted = self._controls[config] = self._controls_now()
        if config.policy not in self.policy_choices:
            self.policy_choices = [*self.policy_choices, config.policy]
        # Busy before the trace starts: a trace that ends before `request`
        # returns (a cached answer, or a quick thread) then leaves it clear.
        self.busy = True
        self.status = f"tracing {config.label()} …"
        self.live.request(config)

    # ---- answers, from Live (a worker thread, or this one for a cached answer) -----------

    def _show(self, shown: Shown) -> None:
        a = shown.analysis
        self.analysis = a
        seen = [n for n in self.names]
        seen += [n.name for n in a.names if n.name not in seen]
        how = "from the cache" if shown.cached else f"traced in {shown.seconds:.2f} s"
        with self.hold_sync():
            self.names = seen
            self.html = shown.html
            self.error = ""
            self.busy = False
            self.status = f"{shown.config.label()} · {how}"

    def _fail(self, config: Config, message: str) -> None:
        """A trace that failed: its error in place, and the controls back to
        the analysis still shown."""
        shown = self.analysis.config if self.analysis is not None else None
        with self.hold_sync():
            if shown is not None and shown in self._controls:
                self._accepted = self._controls[shown]
                self._restore(self._accepted)
            self.error = message
            self.busy = False
            self.status = f"{config.label()} failed; showing the last good analysis"

    # ---- where the widget's script cannot run -----------------------------------------
    #
    # A notebook executed headless (nbclient, `jupyter nbconvert --execute`,
    # papermill) saves the widget's state, and nbconvert then renders the
    # widget's view, which needs scripts from the network, instead of any
    # `text/html` in the same output. So the display is two outputs: the live
    # view, and `show`'s display of the code as written beside it, as an
    # output of its own that every viewer renders. Where the view runs, its
    # stylesheet (widget.css, which the page loads with the view) hides that
    # static copy.

    def _ipython_display_(self, **kwargs: Any) -> None:
        from IPython.display import display

        bundle = self._view_bundle(**kwargs)
        assert bundle is not None  # an anywidget has a view to show
        data, metadata = bundle
        display(data, metadata=metadata, raw=True)
        if self.html:
            display({"text/html": static_copy(self.html)}, raw=True)

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict, dict] | None:
        """One output, for frontends that ask for a bundle instead of IPython's
        display: the view, with `show`'s display as its `text/html`."""
        bundle = self._view_bundle(**kwargs)
        if bundle is None:
            return None
        data, metadata = bundle
        if self.html:
            data = {**data, "text/html": self.html}
        return data, metadata

    def _view_bundle(self, **kwargs: Any) -> tuple[dict, dict] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        return {**data, "text/plain": STATIC_NOTE}, metadata


STATIC_NOTE = "remat-tui widget: live in a notebook with its kernel"
STATIC_CLASS = "remat-tui-static"  # widget.css hides it where the view runs


def static_copy(html: str) -> str:
    """`show`'s display as the widget's static copy (see _ipython_display_)."""
    return f'<div class="{STATIC_CLASS}">{html}</div>'
