"""Building the student version of one assignment with nbgrader's preprocessors.

`build_assignment` reads `solutions/<id>/<id>.py`, validates it (`grader.release.validate`), runs
`PIPELINE` over it in order as nbgrader's converters do (nbgrader's `generate_assignment` order,
minus the gradebook and header/footer), normalises the volatile metadata away and writes the
jupytext pair `<id>.ipynb` + `<id>.py` (percent format) plus the declared data files into a
fresh directory. The same source always gives the same bytes.

Stubs. `StubSolutions` is nbgrader's `ClearSolutions` with one addition: its code stub raises
``NotImplementedError("<name>: implement this (see the docstring)")`` (`STUB_MESSAGE`) naming the
function whose body the stub is in (found with `ast`), else the function the cleared region
defined, else the cell's `grade_id`. A single configurable string cannot name a different
function per region, so the stub is written with a placeholder that the same preprocessor fills
cell by cell; it runs before `ComputeChecksums` so the checksums cover the final text.
"""

from __future__ import annotations

import ast
import re
import shutil
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import jupytext
from nbgrader.preprocessors import (
    CheckCellMetadata,
    ClearHiddenTests,
    ClearMarkScheme,
    ClearOutput,
    ClearSolutions,
    ComputeChecksums,
    LockCells,
)
from traitlets import Dict

from grader.core.regions import BEGIN_SOLUTION, SOLUTION, regions
from grader.core.stubs import STUB_MESSAGE
from grader.release.embed import embed_course
from grader.release.tree import rel_name
from grader.release.validate import ReleaseError, data_files, read_source, validate_source

if TYPE_CHECKING:
    from nbformat import NotebookNode

_PLACEHOLDER = "__GRADER_STUB_FUNCTION__"
CODE_STUB = (
    f'# YOUR CODE HERE\nraise NotImplementedError("{STUB_MESSAGE.format(function=_PLACEHOLDER)}")'
)

PAIR_FORMATS = "ipynb,py:percent"
DEFAULT_KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
# Cell metadata that survives the release; everything else (execution times, collapsed, ids of
# other tools, colab, vscode...) is volatile and dropped so a second run changes no byte.
CELL_METADATA_KEYS = ("deletable", "editable", "jupyter", "nbgrader", "slideshow", "tags")


def _parse_lenient(source: str) -> ast.Module | None:
    """ast of a cell, with IPython magics and shell lines blanked (line numbers kept)."""
    lines = []
    for line in source.split("\n"):
        s = line.lstrip()
        lines.append(line[: len(line) - len(s)] + "pass" if s.startswith(("%", "!")) else line)
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _defined_function(region: str) -> str | None:
    tree = _parse_lenient(textwrap.dedent(region))
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node.name
    return None


def _enclosing_function(tree: ast.Module | None, lineno: int) -> str | None:
    best, best_start = None, -1
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            end = node.end_lineno or node.lineno
            if node.lineno <= lineno <= end and node.lineno > best_start:
                best, best_start = node.name, node.lineno
    return best


def _name_stubs(source: str, cleared: list[str], fallback: str) -> str:
    """`source` with each stub placeholder replaced by the function the stub stands for."""
    tree = _parse_lenient(source)
    out, k = [], 0
    for n, line in enumerate(source.split("\n"), start=1):
        if _PLACEHOLDER in line:
            name = _enclosing_function(tree, n)
            if name is None and k < len(cleared):
                name = _defined_function(cleared[k])
            line = line.replace(_PLACEHOLDER, name or fallback)
            k += 1
        out.append(line)
    return "\n".join(out)


class StubSolutions(ClearSolutions):
    """nbgrader's ClearSolutions whose code stub names the function it stands for."""

    code_stub = Dict({"python": CODE_STUB}, help="The stub, with the function placeholder").tag(
        config=True
    )

    def preprocess_cell(
        self, cell: NotebookNode, resources: dict, cell_index: int
    ) -> tuple[NotebookNode, dict]:
        cleared = []
        if cell.cell_type == "code" and BEGIN_SOLUTION in cell.source:
            lines = cell.source.split("\n")
            cleared = ["\n".join(r.body(lines)) for r in regions(lines) if r.kind == SOLUTION]
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if _PLACEHOLDER in cell.source:
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            cell.source = _name_stubs(cell.source, cleared, gid or f"cell {cell_index + 1}")
        return cell, resources


# nbgrader's generate_assignment preprocessors, in its order, with StubSolutions for
# ClearSolutions (no gradebook: SaveCells; no header/footer).
PIPELINE = (
    LockCells,
    StubSolutions,
    ClearOutput,
    CheckCellMetadata,
    ComputeChecksums,
    ClearHiddenTests,
    ClearMarkScheme,
    ComputeChecksums,
    CheckCellMetadata,
)


def run_pipeline(nb: NotebookNode) -> NotebookNode:
    """`nb` through every preprocessor of `PIPELINE`, in order."""
    resources: dict = {}
    for step in PIPELINE:
        nb, resources = step().preprocess(nb, resources)
    return nb


def _cell_id(index: int, cell: NotebookNode, used: set[str]) -> str:
    gid = str(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or "")
    cand = re.sub(r"[^A-Za-z0-9_-]", "-", gid)[:64]
    if not cand or cand in used:
        cand = f"cell-{index:03d}"
    while cand in used:
        cand += "x"
    used.add(cand)
    return cand


def _normalise(nb: NotebookNode, kernelspec: dict | None) -> None:
    """Strip volatile metadata; fixed ids; declare the jupytext pair."""
    nb.nbformat, nb.nbformat_minor = 4, 5
    ks = dict(kernelspec or DEFAULT_KERNELSPEC)
    nb.metadata = {"jupytext": {"formats": PAIR_FORMATS}, "kernelspec": ks}
    used: set[str] = set()
    for i, cell in enumerate(nb.cells):
        cell["id"] = _cell_id(i, cell, used)
        meta = cell.get("metadata", {})
        cell["metadata"] = {k: meta[k] for k in CELL_METADATA_KEYS if k in meta}
        if cell.cell_type == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        if cell.cell_type != "markdown":
            cell.pop("attachments", None)


def _check_pair(rel: str, nb: NotebookNode, py_text: str) -> None:
    """The .py must read back as the same cells as the .ipynb (the pairing rule relies on it)."""
    back = jupytext.reads(py_text, fmt="py:percent")
    a = [(c.cell_type, c.source, dict(c.metadata)) for c in nb.cells]
    b = [(c.cell_type, c.source, dict(c.metadata)) for c in back.cells]
    if a != b:
        bad = next(
            (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )
        raise ReleaseError(
            [
                f"{rel}: the percent .py does not read back as the notebook "
                f"(cell {bad + 1} differs); simplify that cell"
            ]
        )


def build_assignment(root: Path, assignment_id: str, out: Path) -> list[Path]:
    """Write the student version of one assignment into `out` (a fresh directory).

    Raises ReleaseError naming file and line for a bad source; returns the files written.
    """
    src = root / "solutions" / assignment_id / f"{assignment_id}.py"
    rel = rel_name(root, src)
    text, nb = read_source(root, src)
    errors = validate_source(root, src, text, nb)
    if errors:
        raise ReleaseError(errors)
    language = nb.metadata.get("kernelspec", {}).get("language", "python")
    if language != "python":
        raise ReleaseError([f"{rel}: kernelspec language {language!r}; release handles python"])
    kernelspec = nb.metadata.get("kernelspec")
    embed_course(nb, root)  # before the checksums: they cover the released text
    try:
        nb = run_pipeline(nb)
    except Exception as exc:  # nbgrader raises RuntimeError / ValidationError
        raise ReleaseError([f"{rel}: nbgrader refused it: {type(exc).__name__}: {exc}"]) from exc
    leftover = [i for i, c in enumerate(nb.cells) if _PLACEHOLDER in c.source]
    if leftover:
        raise ReleaseError([f"{rel}: stub placeholder left in cell {leftover[0] + 1}"])
    _normalise(nb, kernelspec)

    ipynb_text = jupytext.writes(nb, fmt="ipynb")
    py_text = jupytext.writes(nb, fmt="py:percent")
    ipynb_text = ipynb_text if ipynb_text.endswith("\n") else ipynb_text + "\n"
    py_text = py_text if py_text.endswith("\n") else py_text + "\n"
    _check_pair(rel, nb, py_text)

    out.mkdir(parents=True, exist_ok=False)
    written = []
    for name, body in ((f"{assignment_id}.ipynb", ipynb_text), (f"{assignment_id}.py", py_text)):
        (out / name).write_bytes(body.encode("utf-8"))
        written.append(out / name)
    for data in data_files(root, assignment_id):
        dest = out / data.relative_to(src.parent)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data, dest)
        written.append(dest)
    return written
