"""Provides Painter: the one place that decides what the main screen says
about the state (a Scene, app/state/scene.py): the title, the snippet and status
line, the cautions above the panes, the sidebar's lists and the name states
shown there. The main screen's ShownView (app/widgets/shown_view.py) writes it into
the widgets.

Owned by the App (not a mixin): it is given the view and the controllers
whose results it shows (the analyses for the baseline and the names seen,
the compiles, the Names verdicts, the activity), and a Scene each time it
paints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.markup import escape

from remat_tui.app.controllers.analyses import Analyses
from remat_tui.app.controllers.compiles import Compiles
from remat_tui.app.controllers.name_judge import NameJudge
from remat_tui.app.controllers.verifying import Verifying
from remat_tui.app.state.scene import Scene
from remat_tui.app.state.site_state import scope_states
from remat_tui.app.state.status import Activity, estimate_parts, summary
from remat_tui.app.widgets.shown_view import Lists, ShownView
from remat_tui.core.setup.meshes import mesh_words

if TYPE_CHECKING:
    from remat_tui.core.model import Analysis


class Painter:
    """What the main screen shows, for one App."""

    def __init__(
        self,
        view: Callable[[], ShownView],
        analyses: Analyses,
        compiles: Compiles,
        name_judge: NameJudge,
        activity: Activity,
        show_timings: bool,
        verifying: Verifying,
    ) -> None:
        self.view = view  # the main screen's (it is made after the App)
        self.analyses = analyses
        self.compiles = compiles
        self.name_judge = name_judge
        self.activity = activity
        self.show_timings = show_timings
        self.verifying = verifying

    def name_states(self, s: Scene) -> dict[str, str]:
        """R/S/O of each name where name toggles apply: read from the policy
        wanted there (app/state/site_state.py), never stored."""
        if s.target is None:
            return {}
        return scope_states(s.scope, s.wanted.config, self.analyses.names_seen())

    def title(self, s: Scene) -> None:
        policy = s.wanted.spec.canonical if s.target else "?"
        name = f"{s.path}:{s.target.name}" if s.target else s.path
        device = s.wanted.device
        # the mesh --mesh built, said as the headless reports say it
        meshed = f", mesh {mesh_words(s.target.mesh)}" if s.target and s.target.mesh else ""
        structure = s.wanted.config.structure  # a row of compare or suggest's answer
        rebuilt = f"structure [b]{escape(str(structure))}[/b]  " if structure else ""
        self.view().show_title(
            f"[b]remat-tui[/b]  {escape(name)}  policy [b]{escape(policy)}[/b]  "
            f"{rebuilt}{device}{meshed}"
        )
        self.view().show_devices(s.devices, device)

    def status(self, s: Scene, a: Analysis) -> None:
        """The snippet and the summary of `a` (against the baseline, led by its
        compile's headline while `p` is on)."""
        self.view().show_snippet(a.python)
        self.view().set_status(self.status_text(s, a))
        known = self.compiles.known_of(s.key_of(a)) if s.wanted.compiled else None
        self.view().show_compiled(known)  # the story's XLA part (y)

    def status_text(self, s: Scene, a: Analysis) -> str:
        base = self.analyses.cache.get(s.baseline_key())
        known = self.compiles.known_of(s.key_of(a)) if s.wanted.compiled else None
        devices = known.devices if known is not None else None
        return summary(a, base, self.show_timings, self.headline(s, a), devices=devices)

    def headline(self, s: Scene, a: Analysis) -> str | None:
        """The compiled peak (or the compile's clock) for `a`, with `x` on its
        measured time beside the estimate, and on a program that sends
        collectives the estimate in its parts; None with `p` off."""
        if not s.wanted.compiled:
            return None
        key = s.key_of(a)
        headline = self.compiles.headline(key, self.show_timings)
        known = self.compiles.known_of(key)
        if headline is None or known is None:
            return headline
        from remat_tui.core.xla.compiled_analysis import estimated

        estimate = estimated(a, known)
        timed = self.compiles.measured_words(key, estimate)
        return " · ".join(w for w in (headline, timed, estimate_parts(estimate)) if w)

    def cautions(self, s: Scene, a: Analysis) -> None:
        """What to know about `a`, above the panes: the command line's warnings,
        the policy's, why the configuration may change nothing
        (core/search/notes/unchanged.py, against as_written when at hand) and the names
        saved in vain."""
        from remat_tui.core.search.notes.unchanged import Baseline, notes_for

        base = self.analyses.cache.get(s.baseline_key())
        in_vain = self.name_judge.verdicts(s.target, a, s.scope)
        states = self.name_states(s)
        notes = notes_for(a, Baseline.of(base) if base is not None else None)
        notes += [why for name, why in in_vain.items() if states.get(name) == "save"]
        self.view().show_cautions([*s.launch_warnings, *a.warnings], notes)

    def lists(self, s: Scene) -> None:
        """The sidebar's lists; and, when no trace the user asked for is
        running, the Names verdicts asked for in the background."""
        shown, scope = s.shown, s.scope
        self.view().show_lists(
            Lists(
                policies=tuple(s.listed),
                current=s.spec.canonical if s.spec else None,
                sites=tuple(shown.sites if shown else ()),
                scope=scope.function if scope else None,
                names=tuple(self.analyses.names_seen()),
                states=self.name_states(s),
                infos=tuple(shown.names if shown else ()),
                in_vain=frozenset(self.name_judge.verdicts(s.target, shown, scope)),
                analysed=shown is not None,
            )
        )
        if self.analyses.pending is None:  # background work waits for the user's trace
            self.name_judge.judge(s.target, shown, scope)

    def verdict(self, s: Scene) -> None:
        """The verdict of the `a` key on the configuration shown (its verify's stage
        and clock while it runs; why it failed); the last one marked stale
        while another configuration is shown; else nothing."""
        from remat_tui.report.verify import brief_lines

        v = self.verifying
        key = s.key_of(s.shown) if s.shown is not None else None
        view = self.view()
        if key is not None and key == v.running:
            clock = v.clock(self.show_timings)
            view.show_verdict(f"verify: {v.stage}…{clock} (press a again to cancel)", "-running")
        elif key is not None and key in v.known:
            found = v.known[key]
            kind = {"equal": "-agree", "agree": "-agree", "differ": "-differ"}
            view.show_verdict("\n".join(brief_lines(found)), kind.get(found.verdict, "-not-run"))
        elif key is not None and key in v.failures:
            view.show_verdict(
                f"verify failed: {v.failures[key]}\n"
                "(the analysis shown stays; press a to try again)",
                "-failed",
            )
        elif v.last is not None and (v.last in v.known or v.last in v.failures):
            was = v.known.get(v.last)
            said = (
                brief_lines(was)[0] if was is not None else f"verify failed: {v.failures[v.last]}"
            )
            verified = v.last[1]  # the request key's Config
            whose = (
                "verified before the file changed"
                if key is not None and key[1] == verified
                else f"verified for {verified.label()}, not the configuration shown"
            )
            view.show_verdict(
                f"stale, {whose}: {said}\n(press a to verify the configuration shown)", "-stale"
            )
        else:
            view.show_verdict(None)

    def activity_line(self, s: Scene) -> None:
        """While a worker runs, what it is doing and for how long (the compile's
        clock while the shown configuration compiles); the UI keeps answering keys."""
        text = self.activity.text(self.show_timings, s.shown is not None)
        if text is not None:
            self.view().set_status(text)
        elif s.shown is not None and self.analyses.pending is None:
            key = self.compiles.compiling  # the compile clock, while it runs
            if key is not None and key == s.key_of(s.shown):
                self.view().set_status(self.status_text(s, s.shown))
