"""The core's layout (issue 44): subsystems in folders a newcomer finds by
name, each folder's docstring naming its modules, and the compile store keyed
by every module that reads XLA's output, in whatever folder it lives."""

import ast
import shutil
from collections import Counter
from pathlib import Path

import remat_tui
from remat_tui.core.xla.compile import service

CORE = Path(remat_tui.__file__).parent / "core"
# The packages whose docstrings list their modules: the search's and xla's
# rooms, and the process's own utilities.
LISTED = ["search", "xla", "runtime"]


def modules(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")


def test_no_folder_holds_three_modules_sharing_a_name_prefix():
    # A prefix shared by three modules names a folder that is missing.
    crowded = {}
    for init in CORE.rglob("__init__.py"):
        prefixes = Counter(m.split("_")[0] for m in modules(init.parent))
        if shared := {p: n for p, n in prefixes.items() if n >= 3}:
            crowded[str(init.parent.relative_to(CORE))] = shared
    assert crowded == {}


def test_the_core_keeps_at_most_six_loose_modules():
    assert len(modules(CORE)) <= 6, modules(CORE)


def test_each_folder_of_the_search_and_xla_names_its_modules_and_folders():
    unnamed = {}
    for top in LISTED:
        for init in [CORE / top / "__init__.py", *(CORE / top).glob("*/__init__.py")]:
            doc = ast.get_docstring(ast.parse(init.read_text())) or ""
            parts = modules(init.parent) + [
                p.parent.name for p in init.parent.glob("*/__init__.py")
            ]
            if missing := [m for m in parts if f"`{m}`" not in doc]:
                unnamed[str(init.parent.relative_to(CORE))] = missing
    assert unnamed == {}


def copy_reading_code(to: Path) -> Path:
    for folder in service._READING_CODE:
        shutil.copytree(
            CORE.parent / folder, to / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    return to


def test_the_store_key_reads_modules_in_subfolders(tmp_path):
    # Its digest read core/xla/*.py alone: after the move into folders, a
    # change to compile/compiled.py (how XLA's numbers are read) would have
    # left the key as it was, and the store answered with stale numbers.
    package = copy_reading_code(tmp_path)
    assert service.code_digest(package) == service._reading_code()
    nested = package / "core" / "xla" / "compile" / "compiled.py"
    nested.write_text(nested.read_text() + "\n# changed\n")
    assert service.code_digest(package) != service._reading_code()


def test_the_store_key_reads_where_a_module_lives(tmp_path):
    # The same bytes in another folder are another layout: another key.
    package = copy_reading_code(tmp_path)
    before = service.code_digest(package)
    xla = package / "core" / "xla"
    (xla / "buffers" / "occupancy.py").rename(xla / "occupancy.py")
    assert service.code_digest(package) != before
