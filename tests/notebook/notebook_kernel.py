"""Runs notebooks headlessly for the tests, in a Jupyter kernel of the
interpreter running the tests (ipykernel, from the notebook extra), through
nbclient: the kernelspec is written to a temporary folder naming
sys.executable, so neither a `python3` kernelspec elsewhere on the machine
nor a missing one decides what runs.

`python tests/notebook/notebook_kernel.py` executes examples/remat_in_a_notebook.ipynb
and saves it with its outputs (what CONTRIBUTING.md says to run after editing it).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile

KERNEL = "remat-tui-test"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "remat_in_a_notebook.ipynb")


def require_notebook_stack() -> None:
    """Skip the calling test module without the notebook extra and the
    kernel's packages, except in CI (CI set), where that fails."""
    import pytest

    try:
        import anywidget  # noqa: F401
        import nbclient  # noqa: F401
        import nbformat  # noqa: F401
    except ImportError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but the notebook tests cannot run: {exc}", pytrace=False)
        pytest.skip(
            f"{exc}: pip install -e '.[test,notebook]' for the notebook tests",
            allow_module_level=True,
        )


@contextlib.contextmanager
def kernel_manager():
    """A KernelManager for a kernel of this interpreter."""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    # The parent's environment (with conftest's XLA_FLAGS and the libtpu quieting
    # that core.setup.devices sets) is the kernel's.
    import remat_tui.core.setup.devices  # noqa: F401

    with tempfile.TemporaryDirectory() as folder:
        spec_dir = os.path.join(folder, KERNEL)
        os.makedirs(spec_dir)
        with open(os.path.join(spec_dir, "kernel.json"), "w") as f:
            json.dump(
                {
                    "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": "remat-tui tests",
                    "language": "python",
                },
                f,
            )
        specs = KernelSpecManager(kernel_dirs=[folder])
        yield KernelManager(kernel_name=KERNEL, kernel_spec_manager=specs)


def client(nb, km, cwd: str | None = None, timeout: int = 300, **options):
    """An nbclient NotebookClient running `nb` on `km` (`kernel_manager()`)."""
    from nbclient import NotebookClient

    where = {"metadata": {"path": cwd or ROOT}}
    return NotebookClient(
        nb, km=km, timeout=timeout, kernel_name=KERNEL, resources=where, **options
    )


def execute(nb, cwd: str | None = None, timeout: int = 300, **options):
    """Execute every cell of `nb` (raising CellExecutionError on the first
    error) and return it with its outputs."""
    with kernel_manager() as km:
        client(nb, km, cwd, timeout, **options).execute()
    return nb


def save_example() -> None:
    """Execute the example notebook and write it back with its outputs."""
    import nbformat

    nb = nbformat.read(EXAMPLE, as_version=4)
    nb.metadata.pop("widgets", None)
    # Without the widget's saved state, viewers with no kernel (GitHub, nbconvert,
    # JupyterLab reopening it untrusted) show the widget's HTML fallback.
    execute(nb, cwd=os.path.dirname(EXAMPLE), store_widget_state=False)
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, EXAMPLE)
    print(f"wrote {EXAMPLE} ({os.path.getsize(EXAMPLE):,} bytes)")


if __name__ == "__main__":
    save_example()
