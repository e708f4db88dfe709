"""Where a line of the graded source came from: the student's own file, line or cell.

The trusted side reads the graded cells as one text (`notebook.graded_text`): in a .py each
cell sits at its own lines of the file, so a line number is already the student's; in an .ipynb
the cells follow one another, one blank line apart, and a line is translated here to its cell.
Every line number a student is shown goes through `SourceMap.where`: ``line 840 of
gpu_fundamentals.py`` for the paired script, ``code cell 27 (under "## 5. ..."), line 3 of
gpu_fundamentals.ipynb`` for the notebook: Jupyter numbers no cells, so a cell is named by its
position among the code cells (from 1) and the last markdown heading above it
(`grader.core.notebook.cell_name`, the one way a cell is named to a student).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from grader.core.notebook import cell_name, graded_cells, read_notebook

if TYPE_CHECKING:
    from nbformat import NotebookNode


@dataclass(frozen=True)
class Span:
    """One graded cell of an .ipynb: its first line in the graded text, its length and its name
    (`cell_name`: its position among the code cells and the heading above it)."""

    graded_line: int
    lines: int
    cell: str


@dataclass(frozen=True)
class SourceMap:
    file: str  # the file's name as the student knows it
    ipynb: bool
    spans: tuple[Span, ...] = ()

    def where(self, line: int) -> str:
        """``line N of FILE`` (.py) or ``code cell C (under "..."), line N of FILE`` (.ipynb)."""
        if not self.ipynb:
            return f"line {line} of {self.file}"
        for s in self.spans:
            if s.graded_line <= line < s.graded_line + s.lines:
                return f"{s.cell}, line {line - s.graded_line + 1} of {self.file}"
        return f"line {line} of the graded cells of {self.file}"


def plain(name: str) -> SourceMap:
    """A map for a .py named `name`: its graded lines are its own."""
    return SourceMap(name, False)


def source_map(nb: NotebookNode | None, path: Path | str) -> SourceMap:
    """The map of `nb` (read from `path`) from `graded_text` lines to the student's own."""
    p = Path(path)
    if p.suffix != ".ipynb":
        return SourceMap(p.name, False)
    assert nb is not None  # an .ipynb's map is made from its notebook (`for_file` reads it)
    spans, graded = [], 1
    for cell in graded_cells(nb):
        n = max(1, len(cell.source.splitlines()))
        spans.append(Span(graded, n, cell_name(cell.code, cell.heading)))
        graded += len(cell.source.splitlines()) + 1  # graded_text: one blank line after each
    return SourceMap(p.name, True, tuple(spans))


def for_file(path: Path | str) -> SourceMap:
    """The map of the notebook file at `path`; a .py is not even read (its lines are its own)."""
    p = Path(path)
    return source_map(read_notebook(p) if p.suffix == ".ipynb" else None, p)
