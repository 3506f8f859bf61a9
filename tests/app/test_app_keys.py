"""Every key the main screen binds is offered in the command palette and
listed in the `?` help, as a user finds them there (both are built from the
key table, app/keys.py)."""

from conftest import example
from test_app import SIZE, settle

from remat_tui.app.commands import RematCommands
from remat_tui.app.main import RematApp
from remat_tui.app.messages import NameCycled, PolicyWanted
from remat_tui.app.screens import HelpScreen
from remat_tui.app.screens.main_screen import MainScreen


def bound_action(action: str) -> str:
    """A binding's action as the palette runs it: no `app.` prefix, and the
    ten policy keys as one (the palette offers each listed policy by name)."""
    action = action.removeprefix("app.")
    return "policy" if action.startswith("policy(") else action


def palette_action(command) -> str | None:
    """What a palette entry does: the action it runs, or the key it stands for."""
    if command.func.__name__ == "run_action":
        return command.args[0].partition(".")[2]
    message = command.args[0]
    return {PolicyWanted: "policy", NameCycled: "cycle_name"}.get(type(message))


async def test_every_binding_is_in_the_palette_and_the_help():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        bindings = MainScreen.BINDINGS
        assert len(bindings) > 20  # the test reads the real table

        hits = [hit async for hit in RematCommands(app.screen).discover()]
        offered = {palette_action(hit.command) for hit in hits}
        if any(c.title == "Quit" for c in app.get_system_commands(app.screen)):
            offered.add("quit")  # Textual's own palette entry
        missing = {b.key: b.action for b in bindings if bound_action(b.action) not in offered}
        assert not missing, f"keys the palette does not offer: {missing}"

        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one("#keys").content
        keys_listed = {str(cell) for cell in table.columns[0]._cells}
        missing = [
            b.key
            for b in bindings
            if (b.key_display or ("0-9" if b.key.isdigit() else b.key)) not in keys_listed
        ]
        assert not missing, f"keys the help does not list: {missing}"
