"""Reading and validating a solution source before anything is built from it.

`solutions/<id>/<id>.py` is a jupytext percent script. `validate_source` returns every problem,
each naming file and line (the raw line of a marker, else the ``# %%`` line of the cell; only
when the text cannot be mapped onto the notebook's cells, ``file (cell N)``), and [] when the
source can be released: region markers (unmatched, nested, outside a solution / graded cell; the
one scanner `grader.core.regions`), the nbgrader metadata (present where markers are, schema
version 3, grade_id/solution/grade/locked, unique grade_id, points on graded cells), then
nbgrader's own metadata validator as a backstop, and the shared setup cells held to their one
copy (`grader.release.shared_cells`).

Data files. nbgrader copies every non-notebook file of an assignment folder verbatim, which is how
solution sources leak. Release copies nothing from `solutions/<id>/` but the files listed, one
relative path (or glob) per line, in `solutions/<id>/release-files.txt` (`data_files`); `.py`
and `.ipynb` are refused there. By default nothing is copied.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import jupytext
from nbgrader.nbgraderformat import MetadataValidator

from grader.core.errors import UsageError
from grader.core.regions import HIDDEN_TESTS, SOLUTION, scan
from grader.release import shared_cells
from grader.release.tree import rel_name

if TYPE_CHECKING:
    from nbformat import NotebookNode

RELEASE_MANIFEST = "release-files.txt"
REQUIRED_NBGRADER_KEYS = ("grade_id", "solution", "grade", "locked")
_CELL_MARKER_RE = re.compile(r"^\s*#\s*(%%|<codecell>|In\[[0-9 ]*\]:?)")


class ReleaseError(UsageError):
    """Release refused; `findings` name each problem (file and line where there is one)."""

    def __init__(self, findings: Sequence[str]):
        self.findings = list(findings)
        super().__init__("\n".join(self.findings))


def cell_ranges(lines: list[str], ncells: int) -> list[tuple[int, int, int]] | None:
    """(header line, first body line, end line exclusive), 0-based, of each jupytext cell.

    None when the text cannot be mapped onto `ncells` cells (then errors name the cell index).
    """
    start = 0
    if lines and lines[0].strip() == "# ---":
        for i in range(1, len(lines)):
            if lines[i].strip() == "# ---":
                start = i + 1
                break
    headers = [i for i in range(start, len(lines)) if _CELL_MARKER_RE.match(lines[i])]
    ranges: list[tuple[int, int, int]] = []
    first = headers[0] if headers else len(lines)
    if any(line.strip() for line in lines[start:first]):
        lead = next(i for i in range(start, first) if lines[i].strip())
        ranges.append((lead, lead, first))
    for k, h in enumerate(headers):
        end = headers[k + 1] if k + 1 < len(headers) else len(lines)
        ranges.append((h, h + 1, end))
    return ranges if len(ranges) == ncells else None


def _marker_problems(
    rel: str,
    head: str,
    lines: list[str],
    ranges: list[tuple[int, int, int]] | None,
    index: int,
    cell: NotebookNode,
) -> tuple[list[str], dict[str, str]]:
    """(errors naming file and line, {kind: where its first region opens}) for one cell."""
    if ranges is not None:
        _, body, end = ranges[index]
        found, problems = scan(lines[body:end], first=body + 1)

        def loc(n: int) -> str:
            return f"{rel}:{n}"
    else:
        found, problems = scan(cell.source.splitlines())

        def loc(n: int) -> str:
            return f"{rel} (cell {index + 1}, line {n})"

    opened: dict[str, str] = {}
    for region in sorted(found, key=lambda r: r.begin):
        opened.setdefault(region.kind, loc(region.begin) if ranges is not None else head)
    return [f"{loc(p.line)}: {p.message}" for p in problems], opened


def _metadata_problems(
    nbg: dict, opened: dict[str, str], head: str, seen_ids: dict[str, str]
) -> list[str]:
    errors = []
    if SOLUTION in opened and not nbg.get("solution"):
        errors.append(
            f"{opened[SOLUTION]}: solution region outside a solution cell "
            f'(the cell at {head} needs "solution": true)'
        )
    if HIDDEN_TESTS in opened and not nbg.get("grade"):
        errors.append(
            f"{opened[HIDDEN_TESTS]}: hidden tests region outside a graded "
            f'test cell (the cell at {head} needs "grade": true)'
        )
    version = nbg.get("schema_version")
    if version != 3:
        errors.append(
            f"{head}: nbgrader metadata schema_version is {version!r}; "
            "release needs schema_version 3"
        )
    missing = [k for k in REQUIRED_NBGRADER_KEYS if k not in nbg]
    if missing:
        errors.append(f"{head}: nbgrader metadata lacks {', '.join(missing)}")
    gid = nbg.get("grade_id")
    if gid is not None:
        if gid in seen_ids:
            errors.append(f"{head}: duplicate grade_id {gid!r} (also at {seen_ids[gid]})")
        else:
            seen_ids[gid] = head
    if nbg.get("grade"):
        pts = nbg.get("points")
        if pts is None:
            errors.append(f"{head}: graded cell {gid!r} has no points")
        elif isinstance(pts, bool) or not isinstance(pts, (int, float)) or pts < 0:
            errors.append(f"{head}: graded cell {gid!r} has invalid points {pts!r}")
    return errors


def validate_source(root: Path, path: Path, text: str, nb: NotebookNode) -> list[str]:
    """Every problem of a solution source, each naming file and line; [] when it can be released
    (see the module docstring for what is checked)."""
    rel = rel_name(root, path)
    lines = text.splitlines()
    ranges = cell_ranges(lines, len(nb.cells))
    errors: list[str] = []
    seen_ids: dict[str, str] = {}
    validator = MetadataValidator()
    for i, cell in enumerate(nb.cells):
        head = f"{rel}:{ranges[i][0] + 1}" if ranges is not None else f"{rel} (cell {i + 1})"
        cell_errors, opened = _marker_problems(rel, head, lines, ranges, i, cell)
        nbg = cell.get("metadata", {}).get("nbgrader")
        if opened and nbg is None:
            kind = next(iter(opened))
            cell_errors.append(
                f"{opened[kind]}: '### BEGIN {kind}' in a cell without nbgrader metadata; add "
                'nbgrader={"grade": ..., "grade_id": ..., "locked": false, "schema_version": 3, '
                f'"solution": ..., "task": false}} to its "# %%" line ({head})'
            )
        if nbg is not None and not isinstance(nbg, dict):
            cell_errors.append(f"{head}: nbgrader metadata must be a JSON object")
            nbg = None
        if nbg is not None:
            cell_errors += _metadata_problems(nbg, opened, head, seen_ids)
            if not cell_errors:
                try:
                    validator.validate_cell(copy.deepcopy(cell))
                except Exception as exc:  # nbgrader raises ValidationError / SchemaMismatchError
                    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    cell_errors.append(f"{head}: nbgrader rejects the metadata: {msg}")
        errors += cell_errors
    for k, gid in shared_cells.stale(nb):
        head = f"{rel}:{ranges[k][0] + 1}" if ranges is not None else f"{rel} (cell {k + 1})"
        errors.append(shared_cells.stale_message(head, gid))
    return errors


def read_source(root: Path, path: Path) -> tuple[str, NotebookNode]:
    """(text, jupytext notebook) of a solution source; ReleaseError when it cannot be read."""
    rel = rel_name(root, path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ReleaseError([f"{rel}: solution source not found"]) from exc
    except UnicodeDecodeError as exc:
        raise ReleaseError([f"{rel}: not UTF-8 text"]) from exc
    try:
        nb = jupytext.reads(text, fmt="py:percent")
    except Exception as exc:  # jupytext raises many types
        raise ReleaseError(
            [f"{rel}: jupytext cannot read it: {type(exc).__name__}: {exc}"]
        ) from exc
    return text, nb


def data_files(root: Path, assignment_id: str) -> list[Path]:
    """Files of solutions/<id>/ declared in release-files.txt (never .py or .ipynb)."""
    folder = root / "solutions" / assignment_id
    manifest = folder / RELEASE_MANIFEST
    if not manifest.is_file():
        return []
    rel = rel_name(root, manifest)
    errors, files = [], []
    for n, raw in enumerate(manifest.read_text(encoding="utf-8").splitlines(), start=1):
        pattern = raw.split("#", 1)[0].strip()
        if not pattern:
            continue
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            errors.append(f"{rel}:{n}: {pattern!r} must be a path inside {folder.name}/")
            continue
        matches = sorted(p for p in folder.glob(pattern) if p.is_file())
        if not matches:
            errors.append(f"{rel}:{n}: {pattern!r} matches no file")
        for m in matches:
            if m.suffix in (".py", ".ipynb", ".pyc") or m.name == RELEASE_MANIFEST:
                errors.append(
                    f"{rel}:{n}: {m.name} cannot be released as a data file "
                    "(notebooks and Python sources would leak solutions)"
                )
            elif m not in files:
                files.append(m)
    if errors:
        raise ReleaseError(errors)
    return files


def declared_data(root: Path) -> set[Path]:
    """Every data file any assignment declares (resolved); a bad manifest declares none."""
    out: set[Path] = set()
    sol = root / "solutions"
    if not sol.is_dir():
        return out
    for d in sorted(p for p in sol.iterdir() if p.is_dir()):
        try:
            out.update(p.resolve() for p in data_files(root, d.name))
        except ReleaseError:
            continue
    return out
