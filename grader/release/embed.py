"""The course figures a released notebook needs on its own, written into it at release time.

A student on Colab opens a notebook straight from GitHub: the notebook file alone, no clone, so
no course.toml beside it. The setup cell of a solution declares the placeholder `MARKER`
(``COURSE_HARDWARE = {}``); release replaces that line with the course's ``[hardware]`` tables
as a Python literal, so the self-checks that read GPU figures work without the repository. The
figures still live once, in course.toml: the literal is generated from it, and `release --check`
fails when it is stale. One policy in every notebook: a course.toml found at or above the working
directory is read; only when there is none does the notebook use its copy (each notebook's own
reader, e.g. gpu_fundamentals' `_hardware_table`). The whole ``[hardware]`` table is embedded,
optional keys such as ``sustained_fp16_tflops`` included, so a notebook never needs a file.
"""

from __future__ import annotations

import pprint
import re
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nbformat import NotebookNode

MARKER = "COURSE_HARDWARE = {}"
_LINE = re.compile(r"(?m)^COURSE_HARDWARE = \{\}(?P<comment>[ \t]*#.*)?$")


def hardware_literal(root: Path) -> str:
    """course.toml's [hardware] tables as the assignment line release writes."""
    with open(Path(root) / "course.toml", "rb") as fh:
        hardware = tomllib.load(fh).get("hardware", {})
    body = pprint.pformat(hardware, width=96, sort_dicts=True)
    return "COURSE_HARDWARE = " + body.replace("\n", "\n" + " " * len("COURSE_HARDWARE = "))


def embed_course(nb: NotebookNode, root: Path) -> int:
    """Replace the placeholder line in `nb`'s code cells; how many were replaced."""
    line = hardware_literal(root)
    count = 0
    for cell in nb.cells:
        if cell.cell_type == "code" and _LINE.search(cell.source):
            cell.source = _LINE.sub(lambda m: line, cell.source)
            count += 1
    return count
