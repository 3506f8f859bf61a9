"""The core knows nothing of the terminal; the package root stays light."""

import ast
import subprocess
import sys


def modules_after(statement: str) -> set[str]:
    code = f"{statement}\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return {m.split(".")[0] for m in out.split()}


def test_core_imports_no_textual_or_rich():
    loaded = modules_after(
        "import remat_tui.core.trace.analysis, remat_tui.core.setup.loading, "
        "remat_tui.core.setup.policies"
    )
    assert "jax" in loaded
    assert "textual" not in loaded and "rich" not in loaded
    assert "flax" not in loaded  # not a dependency: the Linen helpers are printed, not imported


WIDGET_STACK = {"anywidget", "ipywidgets", "traitlets", "IPython", "ipykernel", "comm"}


def test_package_root_imports_neither_jax_nor_textual():
    loaded = modules_after("import remat_tui, remat_tui.cli")
    assert "jax" not in loaded and "textual" not in loaded
    assert not loaded & WIDGET_STACK, "the notebook extra loads only with remat_tui.widget"


def test_notebook_layer_loads_the_widget_stack_only_for_the_widget():
    loaded = modules_after("import remat_tui.notebook, remat_tui.notebook.show")
    assert not loaded & (WIDGET_STACK | {"jax", "rich"})
    loaded = modules_after("import remat_tui.notebook.hooks")
    assert "rich" in loaded and not loaded & WIDGET_STACK  # displays, no widget


def test_the_layering_contracts_hold():
    # pyproject.toml's [tool.importlinter] contracts: app -> report -> core.
    import os
    import shutil

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    command = shutil.which("lint-imports", path=os.path.dirname(sys.executable))
    assert command, "lint-imports (import-linter, in the test extra) is not installed"
    proc = subprocess.run([command], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


# Private attributes of objects that are remat-tui's own, read on purpose.
OWN_PRIVATE = {("registry", "_collector"), ("os", "_exit")}


def jax_private_touches(tree: ast.AST) -> list[str]:
    """What a module does with JAX's private structure: imports of jax._src,
    reads of private attributes, equation params and primitive names."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [f"{node.module}.{a.name}" for a in node.names] if node.module else []
            if any(n.startswith("jax._src") for n in [node.module or "", *names]):
                found.append(f"line {node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("jax._src"):
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.Attribute):
            base = ast.unparse(node.value)
            private = node.attr.startswith("_") and not node.attr.startswith("__")
            # self, cls and super(): an object's own attributes, inherited ones too
            own = base in ("self", "cls", "super()")
            if private and not own and (base, node.attr) not in OWN_PRIVATE:
                found.append(f"line {node.lineno}: {base}.{node.attr}")
            elif node.attr == "params" or (node.attr == "name" and base.endswith(".primitive")):
                found.append(f"line {node.lineno}: {base}.{node.attr}")
    return found


def test_jax_private_structure_only_in_jaxcompat():
    import pathlib

    import remat_tui

    root = pathlib.Path(remat_tui.__file__).parent
    compat = root / "core" / "jaxcompat"
    offenders = {
        str(p.relative_to(root)): touches
        for p in sorted(root.rglob("*.py"))
        if compat not in p.parents and (touches := jax_private_touches(ast.parse(p.read_text())))
    }
    assert offenders == {}


def test_jax_src_is_imported_in_one_module():
    import pathlib

    import remat_tui

    root = pathlib.Path(remat_tui.__file__).parent
    importers = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if any(t.split(": ", 1)[1].startswith(("from jax._src", "import jax._src"))
               for t in jax_private_touches(ast.parse(p.read_text())))
    )  # fmt: skip
    assert importers == ["core/jaxcompat/private.py"]


def test_the_hygiene_check_sees_what_it_must():
    # The checker itself, on code that breaks each rule and code that does not.
    bad = ast.parse(
        "from jax._src import core\nimport jax._src.ad_checkpoint\nfrom jax import _src\n"
        "x = eqn.params['jaxpr']\ny = eqn.primitive.name\nz = policy._fields\n"
    )
    assert len(jax_private_touches(bad)) == 6
    good = ast.parse(
        "import jax\nself._x = r.primitive\nos._exit(0)\nv = a.__name__\nsuper()._repr()\n"
    )
    assert jax_private_touches(good) == []


def test_app_draws_its_first_frame_before_jax_is_imported():
    # The app imports jax only in its loading worker, so `remat-tui FILE` shows a
    # loading screen at once instead of a blank terminal for the import's seconds.
    loaded = modules_after("import remat_tui.app.main")
    assert "textual" in loaded and "jax" not in loaded
