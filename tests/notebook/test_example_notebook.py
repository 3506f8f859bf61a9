"""examples/remat_in_a_notebook.ipynb runs from top to bottom in a fresh kernel
without an error, is saved with its outputs (each cell's the same kinds as a
fresh run gives: `python tests/notebook/notebook_kernel.py` saves it again), and its
outputs stay small. Skipped without the notebook extra, except in CI."""

import copy
import json
import os

from notebook_kernel import require_notebook_stack

require_notebook_stack()

import nbformat  # noqa: E402 (after the check that it is installed)
from notebook_kernel import EXAMPLE, execute  # noqa: E402

LARGEST_OUTPUT = 100_000  # bytes of one output's JSON
LARGEST_FILE = 1_000_000


def kinds(cell) -> list:
    """What a cell's outputs are: stream names or mime types, in order."""
    return [o.get("name") or sorted(o.get("data", {})) for o in cell.get("outputs", [])]


def test_the_example_notebook_runs_and_is_saved_with_its_outputs(tmp_path):
    saved = nbformat.read(EXAMPLE, as_version=4)
    fresh = execute(copy.deepcopy(saved), cwd=str(tmp_path), store_widget_state=False)
    code = [i for i, c in enumerate(saved.cells) if c.cell_type == "code"]
    assert [kinds(saved.cells[i]) for i in code] == [kinds(fresh.cells[i]) for i in code]
    shows = sum("remat_tui.show(" in saved.cells[i].source for i in code)
    assert shows >= 5 and sum(bool(saved.cells[i].outputs) for i in code) >= shows + 5
    for i in code:
        for output in saved.cells[i].outputs:
            assert len(json.dumps(output)) < LARGEST_OUTPUT, f"cell {i}: a large output"
    assert os.path.getsize(EXAMPLE) < LARGEST_FILE
    assert "widgets" not in saved.metadata  # viewers without a kernel show its fallback
