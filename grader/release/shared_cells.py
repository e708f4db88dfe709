"""The setup cells kernel assignments share: one copy, here, and each notebook's held to it.

Every notebook whose kernels run in Numba's CUDA simulator without a GPU needs the same cells
before its first exercise: the Colab install cell (`colab_install`), the switch between the GPU
and the simulator made before numba is imported (`setup`, which also holds the release's
``COURSE_HARDWARE = {}`` placeholder), numba's import (`numba_setup`), and the self-checks'
helpers (`helpers`). Their text lives once, in `SETUP_CELLS`. A solution notebook's code cell
whose nbgrader ``grade_id`` is one of theirs is that shared cell and must hold exactly that text:
`grader new-assignment` writes them into a new notebook, release refuses a notebook whose copy
differs (`grader.release.validate`, naming the cell and the fix), and `grader sync-setup`
copies the text into every solution that has them (`grader.release.scaffold.sync_setup`). A
notebook that wants a setup of its own gives its cell another grade_id; one without kernels
(m9_roofline) has none of them.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import jupytext

if TYPE_CHECKING:
    from nbformat import NotebookNode

TEMPLATES = Path(__file__).resolve().parent / "templates"
SETUP_CELLS = TEMPLATES / "setup_cells.py.tmpl"
SHOWN = "grader/release/templates/setup_cells.py.tmpl"  # how messages name it


def grade_id(cell: NotebookNode) -> str | None:
    nbgrader = cell.get("metadata", {}).get("nbgrader")
    gid = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
    return gid if isinstance(gid, str) else None


@functools.cache
def shared_cells() -> dict[str, str]:
    """grade_id -> source of each shared cell, in the order a notebook holds them."""
    nb = jupytext.reads(SETUP_CELLS.read_text(encoding="utf-8"), fmt="py:percent")
    return {gid: cell.source for cell in nb.cells if (gid := grade_id(cell)) is not None}


def stale(nb: NotebookNode) -> list[tuple[int, str]]:
    """(index, grade_id) of each of `nb`'s shared cells whose text is not the shared text."""
    shared = shared_cells()
    return [
        (k, gid)
        for k, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        and (gid := grade_id(cell)) in shared
        and cell.source != shared[gid]
    ]


def stale_message(where: str, gid: str) -> str:
    """What release says of a shared cell whose copy differs, at `where` (file:line)."""
    return (
        f"{where}: cell {gid!r} is a setup cell the course's notebooks share, but its text "
        f"differs from {SHOWN}: run `grader sync-setup` to copy the shared text in (edit "
        "the template to change every notebook), or give the cell a grade_id of its own"
    )
