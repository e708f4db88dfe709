"""Where a line of the graded source came from: the student's own file, line or cell.

The grader parses and runs the graded cells joined into one text (`notebook.graded_source`),
so its line numbers are of that text, which no student has ever seen. Every line number a
student is shown is translated here first: ``line 840 of gpu_fundamentals.py`` for the paired
script, ``cell 57, line 3 of gpu_fundamentals.ipynb`` for the notebook (cells counted from 1,
markdown cells included, as a notebook shows them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.core.notebook import graded_parts


@dataclass(frozen=True)
class Span:
    """One graded cell: its first line in the graded text, its length, its cell number, and
    its first line in the .py file (0 where it could not be found)."""

    graded_line: int
    lines: int
    cell: int
    file_line: int


@dataclass(frozen=True)
class SourceMap:
    file: str  # the file's name as the student knows it
    ipynb: bool
    spans: tuple[Span, ...] = ()

    def where(self, line: int) -> str:
        """``line N of FILE`` (.py) or ``cell C, line N of FILE`` (.ipynb) for a graded line."""
        for s in self.spans:
            if s.graded_line <= line < s.graded_line + s.lines:
                offset = line - s.graded_line
                if self.ipynb:
                    return f"cell {s.cell}, line {offset + 1} of {self.file}"
                if s.file_line:
                    return f"line {s.file_line + offset} of {self.file}"
        return f"line {line} of the graded cells of {self.file}"


def plain(name: str) -> SourceMap:
    """A map that knows no file: lines are said as lines of the graded cells."""
    return SourceMap(name, False)


def source_map(nb, path: Path | str) -> SourceMap:
    """The map of `nb` (read from `path`) from graded lines to the student's own lines."""
    p = Path(path)
    ipynb = p.suffix == ".ipynb"
    file_lines: list[str] = []
    if not ipynb:
        try:
            file_lines = p.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            file_lines = []
    spans, graded, cursor = [], 1, 0
    for index, text in graded_parts(nb):
        n = len(text.split("\n"))
        first = 0
        if file_lines:
            first, cursor = _find(file_lines, text.split("\n"), cursor)
        spans.append(Span(graded, n, index + 1, first))
        graded += n + 1  # graded_source joins the cells with one blank line
    return SourceMap(p.name, ipynb, tuple(spans))


def _find(file_lines: list[str], cell: list[str], start: int) -> tuple[int, int]:
    """(1-based first line of `cell` in the file, or 0; where to look for the next cell)."""
    anchor = next((i for i, line in enumerate(cell) if line.strip() and not _magic(line)), None)
    if anchor is None:
        return 0, start
    for k in range(start, len(file_lines)):
        if file_lines[k] == cell[anchor]:
            return k - anchor + 1, k - anchor + len(cell)
    return 0, start


def _magic(line: str) -> bool:
    return line.lstrip().startswith(("%", "!", "pass  # magic dropped"))
