"""Release, check, leak proof, verify and the student export.

`solutions/<id>/<id>.py` is the only place answers are written. `release` turns each one into the
student version with nbgrader's own preprocessors and writes it to `exercises/<id>/` as a jupytext
pair (`<id>.ipynb` + `<id>.py`, percent format). Everything is built in a temporary directory,
proven leak-free, then swapped into `exercises/` one assignment directory at a time, so a failure
leaves `exercises/` as it was.

Pipeline per assignment (nbgrader's `generate_assignment` order, minus the gradebook):
``LockCells -> ClearSolutions -> name the stubs -> ClearOutput -> CheckCellMetadata ->
ComputeChecksums -> ClearHiddenTests -> ClearMarkScheme -> ComputeChecksums -> CheckCellMetadata``.

Stubs. `ClearSolutions.code_stub` is configured once with a placeholder for the function name:
``raise NotImplementedError("<name>: implement this (see the docstring)")``. nbgrader does the
clearing; the one step of ours fills each placeholder with the function whose body the stub is
in (found with `ast`), else with the function the cleared region defined, else the cell's
`grade_id`. A single configurable string cannot name a different function per region, so this
is the only post-processing, and it runs before `ComputeChecksums` so the checksums cover the
final text.

Data files. nbgrader copies every non-notebook file of an assignment folder verbatim, which is how
solution sources leak. Release copies nothing from `solutions/<id>/` but the files listed, one
relative path (or glob) per line, in `solutions/<id>/release-files.txt`; `.py` and `.ipynb` are
refused there. By default nothing is copied.

Leak proof (`leak_check`). Secret lines: every line inside a BEGIN/END SOLUTION or BEGIN/END
HIDDEN TESTS region of the solution notebooks, every line of `tests/hidden/**`, and every line of
other files under `solutions/` (except the declared data files). Lines are compared stripped. A
line is not secret when it is *generic* (`is_generic`): blank; a comment; an nbgrader marker; an
import statement; shorter than 8 characters (`return`, `pass`, `else:`, `try:`, `break`, `)`, a
lone triple quote); or naming fewer than two things once Python keywords and
`None/True/False/self/cls` are left out (`return None`, `return total`, `except ValueError:`).
There is no public-by-default escape: a region's or a hidden test's line that also appears
outside a region, in a markdown cell, in `tests/public/**` or in a grader module is still secret,
so pasting it there is a leak. The instructor makes such a line public where it is written: a
trailing `# grader: public` comment, or a line holding only `# grader: public` just above it
(`secret_and_public_lines`). Only the lines of stray files under `solutions/` that the scaffold
ships anyway are excused. Every text file under the scanned tree (the staged release, the
export) is checked: cell sources and text outputs for `.ipynb`, lines otherwise, also with a
leading `#` removed so a markdown cell of a `.py` is seen.

Export (`export_student`). The student repository gets `exercises/`, `tests/public/`, the grader
modules in `STUDENT_MODULES`, `course.toml`, `pyproject.toml`, `README.md` (from
`STUDENT_README.md`), `.github/workflows/` (from `.github/student-workflows/`) and a
`.gitignore`. The grader package holds no secrets (hidden tests live in `tests/hidden/`, never in
the package), but instructor tooling (`INSTRUCTOR_MODULES`: release/verify/export, batch grading,
the gradebook, the demo) is left out. The CLI imports every command's module lazily, so the
student commands work without them. A module in neither list stops the export until it is
classified here: a new module must never ship by accident.
"""

from __future__ import annotations

import ast
import copy
import filecmp
import json
import keyword
import os
import re
import shutil
import tempfile
import textwrap
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.stubs import STUB_MESSAGE
from grader.core.student_repo import STUDENT_GITIGNORE, STUDENT_README, STUDENT_WORKFLOWS

BEGIN_SOLUTION = "BEGIN SOLUTION"
END_SOLUTION = "END SOLUTION"
BEGIN_HIDDEN = "BEGIN HIDDEN TESTS"
END_HIDDEN = "END HIDDEN TESTS"
MARKERS = (
    BEGIN_SOLUTION,
    END_SOLUTION,
    BEGIN_HIDDEN,
    END_HIDDEN,
    "BEGIN MARK SCHEME",
    "END MARK SCHEME",
)

_PLACEHOLDER = "__GRADER_STUB_FUNCTION__"
CODE_STUB = (
    f'# YOUR CODE HERE\nraise NotImplementedError("{STUB_MESSAGE.format(function=_PLACEHOLDER)}")'
)

PAIR_FORMATS = "ipynb,py:percent"
RELEASE_MANIFEST = "release-files.txt"
DEFAULT_KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
# Cell metadata that survives the release; everything else (execution times, collapsed, ids of
# other tools, colab, vscode...) is volatile and dropped so a second run changes no byte.
CELL_METADATA_KEYS = ("deletable", "editable", "jupyter", "nbgrader", "slideshow", "tags")
REQUIRED_NBGRADER_KEYS = ("grade_id", "solution", "grade", "locked")
JUNK_DIRS = frozenset(
    {
        "__pycache__",
        ".ipynb_checkpoints",
        ".pytest_cache",
        ".git",
        ".venv",
        "node_modules",
        ".ruff_cache",
    }
)

MIN_LINE_CHARS = 8
_GENERIC_WORDS = frozenset(keyword.kwlist) | {"None", "True", "False", "self", "cls"}
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?")
_IMPORT_RE = re.compile(
    r"^(import\s+[\w.]+(\s+as\s+\w+)?(\s*,\s*[\w.]+(\s+as\s+\w+)?)*"
    r"|from\s+[\w.]+\s+import\s+.+)$"
)
_CELL_MARKER_RE = re.compile(r"^\s*#\s*(%%|<codecell>|In\[[0-9 ]*\]:?)")
MAX_SCAN_BYTES = 20 * 1024 * 1024
PUBLIC_MARK = "# grader: public"
_PUBLIC_MARK_RE = re.compile(r"#\s*grader:\s*public\s*$")

STUDENT_MODULES = frozenset(
    {"__init__", "__main__", "cli", "core", "sandbox", "suites", "grading", "reports", "github"}
)
INSTRUCTOR_MODULES = frozenset({"release", "batch", "gradebook", "demo"})


# --------------------------------------------------------------------------------------------
# Reports


class ReleaseError(ValueError):
    """Release refused; `findings` name each problem (file and line where there is one)."""

    def __init__(self, findings: Sequence[str]):
        self.findings = list(findings)
        super().__init__("\n".join(self.findings))


class ExportError(ReleaseError):
    """The student export was refused (stale release, leak, unclassified module...)."""


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    from grader.core.tables import format_table

    return format_table(headers, [[str(c) for c in r] for r in rows])


@dataclass
class ReleaseReport:
    """What `release` did (or, with check=True, found). `ok` is False on any finding."""

    check: bool
    assignments: list[str]
    findings: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)  # relative paths swapped into exercises/
    unchanged: list[str] = field(default_factory=list)  # assignments already up to date
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.findings

    def table(self) -> str:
        rows = []
        for a in self.assignments:
            mine = [f for f in self.findings if f"/{a}/" in f or f"{a}:" in f or f" {a} " in f]
            if self.check:
                status = "stale" if mine else "in sync"
            elif self.findings:
                status = "refused" if mine else "not written"
            else:
                status = "unchanged" if a in self.unchanged else "written"
            rows.append((a, status))
        head = "release --check" if self.check else "release"
        out = [_table(("assignment", "status"), rows)]
        out += [f"  {f}" for f in self.findings]
        out.append(f"{head}: {'OK' if self.ok else 'FAILED'} in {self.seconds:.2f} s")
        return "\n".join(out)


@dataclass(frozen=True)
class Leak:
    """A secret line found in a released or exported file."""

    path: str  # the file it was found in, relative to the scanned tree
    line: int  # 1-based line (within the cell for a notebook)
    text: str  # the leaked line, stripped
    origin: str  # where the secret comes from: "solutions/x/x.py:12" or "tests/hidden/...:3"
    cell: int | None = None  # 0-based cell index for an .ipynb

    def __str__(self) -> str:
        where = (
            f"{self.path}:{self.line}"
            if self.cell is None
            else (f"{self.path} cell {self.cell} line {self.line}")
        )
        return f"{where}: leaked {self.text!r} (secret from {self.origin})"


@dataclass
class VerifyRow:
    check: str
    assignment: str
    ok: bool
    detail: str


@dataclass
class VerifyReport:
    rows: list[VerifyRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, check: str, assignment: str, problems: Sequence[str], ok_detail: str) -> None:
        if problems:
            for p in problems:
                self.rows.append(VerifyRow(check, assignment, False, p))
        else:
            self.rows.append(VerifyRow(check, assignment, True, ok_detail))

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    @property
    def findings(self) -> list[str]:
        return [f"{r.check} [{r.assignment}]: {r.detail}" for r in self.rows if not r.ok]

    def table(self) -> str:
        rows = [(r.check, r.assignment, "ok" if r.ok else "FAIL", r.detail) for r in self.rows]
        out = [_table(("check", "assignment", "result", "detail"), rows)]
        out += [f"note: {n}" for n in self.notes]
        bad = len(self.findings)
        out.append(f"verify: {'OK' if self.ok else f'{bad} finding(s)'} in {self.seconds:.1f} s")
        return "\n".join(out)


# --------------------------------------------------------------------------------------------
# Reading and validating a solution source


def _rel(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _cell_ranges(lines: list[str], ncells: int) -> list[tuple[int, int, int]] | None:
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


def _where(rel: str, ranges, index: int, line: int | None = None) -> str:
    """`file:line` for a raw line, else the cell's header line, else `file (cell N)`."""
    if line is not None:
        return f"{rel}:{line + 1}"
    if ranges is not None:
        return f"{rel}:{ranges[index][0] + 1}"
    return f"{rel} (cell {index + 1})"


def _scan_regions(lines: Iterable[str], base: int, loc) -> tuple[list[str], dict[str, int]]:
    """Check the markers of one cell's lines; return (errors, {kind: first line of a region})."""
    errors: list[str] = []
    found: dict[str, int] = {}
    opened: tuple[str, int] | None = None
    kinds = (("SOLUTION", BEGIN_SOLUTION, END_SOLUTION), ("HIDDEN TESTS", BEGIN_HIDDEN, END_HIDDEN))
    last = base
    for off, line in enumerate(lines):
        n = base + off
        last = n
        for kind, begin, end in kinds:
            if begin in line:
                if opened is not None:
                    errors.append(
                        f"{loc(n)}: nested '### BEGIN {kind}' inside the "
                        f"'BEGIN {opened[0]}' region opened at line {opened[1] + 1}"
                    )
                else:
                    opened = (kind, n)
                    found.setdefault(kind, n)
            elif end in line:
                if opened is None:
                    errors.append(
                        f"{loc(n)}: unmatched '### END {kind}' (no BEGIN before it in this cell)"
                    )
                elif opened[0] != kind:
                    errors.append(
                        f"{loc(n)}: '### END {kind}' closes the 'BEGIN {opened[0]}' "
                        f"region opened at line {opened[1] + 1}"
                    )
                    opened = None
                else:
                    opened = None
    if opened is not None:
        errors.append(
            f"{loc(opened[1])}: unmatched '### BEGIN {opened[0]}': no END before the "
            f"cell ends (line {last + 1})"
        )
    return errors, found


def validate_source(root: Path, path: Path, text: str, nb) -> list[str]:
    """Every problem of a solution source, each naming file and line; [] when it can be released.

    Checks markers (unmatched, nested, outside a solution / test cell) and the nbgrader metadata
    (present where markers are, schema_version 3, grade_id/solution/grade/locked, unique
    grade_id, points on graded cells), then nbgrader's own metadata validator as a backstop.
    """
    from nbgrader.nbgraderformat import MetadataValidator

    rel = _rel(root, path)
    lines = text.splitlines()
    ranges = _cell_ranges(lines, len(nb.cells))
    errors: list[str] = []
    seen_ids: dict[str, str] = {}
    validator = MetadataValidator()
    for i, cell in enumerate(nb.cells):
        cell_errors: list[str] = []
        head = _where(rel, ranges, i)
        if ranges is not None:
            _, body, end = ranges[i]
            errs, found = _scan_regions(lines[body:end], body, lambda n: f"{rel}:{n + 1}")
        else:
            errs, found = _scan_regions(
                cell.source.splitlines(), 0, lambda n, i=i: f"{rel} (cell {i + 1}, line {n + 1})"
            )
        cell_errors += errs
        meta = cell.get("metadata", {})
        nbg = meta.get("nbgrader")
        at = {k: (f"{rel}:{v + 1}" if ranges is not None else head) for k, v in found.items()}
        if found and nbg is None:
            kind = next(iter(found))
            cell_errors.append(
                f"{at[kind]}: '### BEGIN {kind}' in a cell without nbgrader metadata; add "
                'nbgrader={"grade": ..., "grade_id": ..., "locked": false, "schema_version": 3, '
                f'"solution": ..., "task": false}} to its "# %%" line ({head})'
            )
        if nbg is not None and not isinstance(nbg, dict):
            cell_errors.append(f"{head}: nbgrader metadata must be a JSON object")
            nbg = None
        if nbg is not None:
            if "SOLUTION" in found and not nbg.get("solution"):
                cell_errors.append(
                    f"{at['SOLUTION']}: solution region outside a solution cell "
                    f'(the cell at {head} needs "solution": true)'
                )
            if "HIDDEN TESTS" in found and not nbg.get("grade"):
                cell_errors.append(
                    f"{at['HIDDEN TESTS']}: hidden tests region outside a graded "
                    f'test cell (the cell at {head} needs "grade": true)'
                )
            version = nbg.get("schema_version")
            if version != 3:
                cell_errors.append(
                    f"{head}: nbgrader metadata schema_version is {version!r}; "
                    "release needs schema_version 3"
                )
            missing = [k for k in REQUIRED_NBGRADER_KEYS if k not in nbg]
            if missing:
                cell_errors.append(f"{head}: nbgrader metadata lacks {', '.join(missing)}")
            gid = nbg.get("grade_id")
            if gid is not None:
                if gid in seen_ids:
                    cell_errors.append(
                        f"{head}: duplicate grade_id {gid!r} (also at {seen_ids[gid]})"
                    )
                else:
                    seen_ids[gid] = head
            if nbg.get("grade"):
                pts = nbg.get("points")
                if pts is None:
                    cell_errors.append(f"{head}: graded cell {gid!r} has no points")
                elif isinstance(pts, bool) or not isinstance(pts, (int, float)) or pts < 0:
                    cell_errors.append(f"{head}: graded cell {gid!r} has invalid points {pts!r}")
            if not cell_errors:
                try:
                    validator.validate_cell(copy.deepcopy(cell))
                except Exception as exc:  # nbgrader raises ValidationError / SchemaMismatchError
                    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    cell_errors.append(f"{head}: nbgrader rejects the metadata: {msg}")
        errors += cell_errors
    return errors


def _read_source(root: Path, path: Path) -> tuple[str, object]:
    import jupytext

    rel = _rel(root, path)
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


# --------------------------------------------------------------------------------------------
# Building the student version


def _solution_regions(source: str) -> list[str]:
    """The text of each solution region of a cell, in order."""
    regions, cur = [], None
    for line in source.split("\n"):
        if BEGIN_SOLUTION in line:
            cur = []
        elif END_SOLUTION in line:
            if cur is not None:
                regions.append("\n".join(cur))
            cur = None
        elif cur is not None:
            cur.append(line)
    return regions


def _parse_lenient(source: str):
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


def _enclosing_function(tree, lineno: int) -> str | None:
    best, best_start = None, -1
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            end = node.end_lineno or node.lineno
            if node.lineno <= lineno <= end and node.lineno > best_start:
                best, best_start = node.name, node.lineno
    return best


def _name_stubs(nb, regions: dict[int, list[str]]) -> None:
    """Fill the placeholder of each ClearSolutions stub with the function it stands for."""
    for i, cell in enumerate(nb.cells):
        if _PLACEHOLDER not in cell.source:
            continue
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or f"cell {i + 1}"
        tree = _parse_lenient(cell.source)
        cleared = regions.get(i, [])
        out, k = [], 0
        for n, line in enumerate(cell.source.split("\n"), start=1):
            if _PLACEHOLDER in line:
                name = _enclosing_function(tree, n)
                if name is None and k < len(cleared):
                    name = _defined_function(cleared[k])
                line = line.replace(_PLACEHOLDER, name or gid)
                k += 1
            out.append(line)
        cell.source = "\n".join(out)


def _cell_id(index: int, cell, used: set[str]) -> str:
    gid = str(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or "")
    cand = re.sub(r"[^A-Za-z0-9_-]", "-", gid)[:64]
    if not cand or cand in used:
        cand = f"cell-{index:03d}"
    while cand in used:
        cand += "x"
    used.add(cand)
    return cand


def _normalise(nb, kernelspec: dict | None) -> None:
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


def _pipeline(nb, regions: dict[int, list[str]]):
    """nbgrader's generate_assignment preprocessors (no gradebook, no header/footer)."""
    from nbgrader.preprocessors import (
        CheckCellMetadata,
        ClearHiddenTests,
        ClearMarkScheme,
        ClearOutput,
        ClearSolutions,
        ComputeChecksums,
        LockCells,
    )

    resources: dict = {}
    steps = [
        LockCells(),
        ClearSolutions(code_stub={"python": CODE_STUB}),
        "name_stubs",
        ClearOutput(),
        CheckCellMetadata(),
        ComputeChecksums(),
        ClearHiddenTests(),
        ClearMarkScheme(),
        ComputeChecksums(),
        CheckCellMetadata(),
    ]
    for step in steps:
        if step == "name_stubs":
            _name_stubs(nb, regions)
        else:
            nb, resources = step.preprocess(nb, resources)
    return nb


def build_assignment(root: Path, assignment_id: str, out: Path) -> list[Path]:
    """Write the student version of one assignment into `out` (a fresh directory).

    Raises ReleaseError naming file and line for a bad source; returns the files written.
    """
    import jupytext

    src = root / "solutions" / assignment_id / f"{assignment_id}.py"
    rel = _rel(root, src)
    text, nb = _read_source(root, src)
    errors = validate_source(root, src, text, nb)
    if errors:
        raise ReleaseError(errors)
    language = nb.metadata.get("kernelspec", {}).get("language", "python")
    if language != "python":
        raise ReleaseError([f"{rel}: kernelspec language {language!r}; release handles python"])
    kernelspec = nb.metadata.get("kernelspec")
    regions = {
        i: _solution_regions(c.source)
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and BEGIN_SOLUTION in c.source
    }
    try:
        nb = _pipeline(nb, regions)
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
    for data in _data_files(root, assignment_id):
        dest = out / data.relative_to(src.parent)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data, dest)
        written.append(dest)
    return written


def _check_pair(rel: str, nb, py_text: str) -> None:
    """The .py must read back as the same cells as the .ipynb (the pairing rule relies on it)."""
    import jupytext

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


def _data_files(root: Path, assignment_id: str) -> list[Path]:
    """Files of solutions/<id>/ declared in release-files.txt (never .py or .ipynb)."""
    folder = root / "solutions" / assignment_id
    manifest = folder / RELEASE_MANIFEST
    if not manifest.is_file():
        return []
    rel = _rel(root, manifest)
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


def _declared_data(root: Path) -> set[Path]:
    out: set[Path] = set()
    sol = root / "solutions"
    if not sol.is_dir():
        return out
    for d in sorted(p for p in sol.iterdir() if p.is_dir()):
        try:
            out.update(p.resolve() for p in _data_files(root, d.name))
        except ReleaseError:
            continue
    return out


# --------------------------------------------------------------------------------------------
# release / check


def _files(tree: Path) -> dict[str, Path]:
    if not tree.is_dir():
        return {}
    out = {}
    for p in sorted(tree.rglob("*")):
        if p.is_file() and not (set(p.relative_to(tree).parts[:-1]) & JUNK_DIRS):
            out[p.relative_to(tree).as_posix()] = p
    return out


def _compare(stage: Path, exercises: Path, ids: Sequence[str], whole: bool) -> list[str]:
    findings = []
    for a in ids:
        new, old = _files(stage / a), _files(exercises / a)
        for name in sorted(set(new) | set(old)):
            path = f"exercises/{a}/{name}"
            if name not in old:
                findings.append(f"{path}: missing (release would write it)")
            elif name not in new:
                findings.append(f"{path}: extra (release would delete it)")
            elif not filecmp.cmp(new[name], old[name], shallow=False):
                findings.append(f"{path}: differs from what release would write")
    if whole and exercises.is_dir():
        for p in sorted(exercises.iterdir()):
            if p.name not in ids and p.name not in JUNK_DIRS:
                findings.append(f"exercises/{p.name}: extra (not an assignment in course.toml)")
    return findings


def _same_tree(a: Path, b: Path) -> bool:
    fa, fb = _files(a), _files(b)
    return fa.keys() == fb.keys() and all(filecmp.cmp(fa[k], fb[k], shallow=False) for k in fa)


def _swap(stage: Path, exercises: Path, ids: Sequence[str], backup: Path) -> list[str]:
    """Move each staged assignment into exercises/; on any error put everything back."""
    exercises.mkdir(exist_ok=True)
    backup.mkdir()
    moved: list[str] = []
    try:
        for a in ids:
            target = exercises / a
            if target.exists():
                os.replace(target, backup / a)
            os.replace(stage / a, target)
            moved.append(a)
    except BaseException:
        for a in ids:
            target = exercises / a
            if a in moved and target.exists():
                shutil.rmtree(target)  # the new version goes; the old one (if any) comes back
            if (backup / a).exists() and not target.exists():
                os.replace(backup / a, target)
        raise
    return moved


def release(root: Path, ids: list[str] | None = None, check: bool = False) -> ReleaseReport:
    """Build exercises/ from solutions/ (or, with check=True, only compare; write nothing)."""
    from grader.core.course import load_course

    t0 = time.perf_counter()
    root = Path(root).resolve()
    course = load_course(root)
    wanted = list(ids) if ids else course.assignment_ids
    report = ReleaseReport(check=check, assignments=wanted)
    unknown = [a for a in wanted if a not in course.assignment_ids]
    if unknown:
        report.findings = [
            f"{a}: not an assignment in course.toml ({', '.join(course.assignment_ids)})"
            for a in unknown
        ]
        report.seconds = time.perf_counter() - t0
        return report
    # Staging sits inside the root so the final swap is a same-filesystem rename.
    parent = None if check else root
    with tempfile.TemporaryDirectory(prefix=".release-", dir=parent) as tmp:
        stage = Path(tmp) / "exercises"
        stage.mkdir()
        for a in wanted:
            try:
                build_assignment(root, a, stage / a)
            except ReleaseError as exc:
                report.findings += exc.findings
        if not report.findings:
            report.findings += [f"leak: {lk}" for lk in leak_check(root, stage)]
        if not report.findings:
            exercises = root / "exercises"
            if check:
                report.findings += _compare(stage, exercises, wanted, whole=not ids)
            else:
                changed = [a for a in wanted if not _same_tree(stage / a, exercises / a)]
                report.unchanged = [a for a in wanted if a not in changed]
                _swap(stage, exercises, changed, Path(tmp) / "previous")
                report.written = [
                    f"exercises/{a}/{n}" for a in changed for n in _files(exercises / a)
                ]
    report.seconds = time.perf_counter() - t0
    return report


# --------------------------------------------------------------------------------------------
# Leak proof


def is_generic(line: str) -> bool:
    """True for a line too generic to reveal anything (see the module docstring)."""
    s = line.strip()
    if len(s) < MIN_LINE_CHARS or s.startswith("#") or any(m in s for m in MARKERS):
        return True
    if _IMPORT_RE.match(s):
        return True
    names = [t for t in _WORD_RE.findall(s) if t not in _GENERIC_WORDS]
    return len(names) < 2


def _text_lines(path: Path) -> list[str] | None:
    try:
        if path.stat().st_size > MAX_SCAN_BYTES:
            return None
        return path.read_bytes().decode("utf-8").splitlines()
    except (UnicodeDecodeError, OSError):
        return None


def _notebook_cells(path: Path):
    """Cells of a solution notebook (.py percent or .ipynb), or None if unreadable."""
    import jupytext

    try:
        text = path.read_text(encoding="utf-8")
        return jupytext.reads(text, fmt="ipynb" if path.suffix == ".ipynb" else "py:percent").cells
    except Exception:  # noqa: BLE001 - an unreadable file is scanned as plain lines instead
        return None


def _split_regions(source: str) -> tuple[list[tuple[int, str]], list[str]]:
    """(lines inside any region with their 0-based index, lines outside every region)."""
    inside, outside, depth = [], [], 0
    for n, line in enumerate(source.split("\n")):
        if BEGIN_SOLUTION in line or BEGIN_HIDDEN in line:
            depth += 1
        elif END_SOLUTION in line or END_HIDDEN in line:
            depth = max(0, depth - 1)
        elif depth:
            inside.append((n, line))
        else:
            outside.append(line)
    return inside, outside


def _cell_starts(path: Path, cells) -> list[int]:
    """0-based line of each cell's first body line in a percent .py (best effort)."""
    lines = _text_lines(path) or []
    ranges = _cell_ranges(lines, len(cells))
    return [r[1] for r in ranges] if ranges else [0] * len(cells)


def _unmarked(lines: Sequence[str], origins: Sequence[str]) -> list[str]:
    """`origins` without those of the lines `_marked_public` drops (the marks of their own)."""
    return [
        o
        for line, o in zip(lines, origins, strict=True)
        if not _PUBLIC_MARK_RE.fullmatch(line.strip())
    ]


def _marked_public(lines: Iterable[str]) -> list[tuple[str, bool]]:
    """Each line (without its mark) and whether the instructor marked it public: a trailing
    `# grader: public`, or a line of its own holding only that mark just above it (for a line
    the mark would push past the line-length limit)."""
    out: list[tuple[str, bool]] = []
    above = False
    for line in lines:
        if _PUBLIC_MARK_RE.fullmatch(line.strip()):
            above = True
            continue
        m = _PUBLIC_MARK_RE.search(line)
        out.append((line[: m.start()].rstrip() if m else line, above or m is not None))
        above = False
    return out


def secret_and_public_lines(root: Path) -> tuple[dict[str, str], set[str]]:
    """(secret line -> where it comes from, lines the instructor marked public at their source).

    There is no public-by-default escape for the lines of a SOLUTION or HIDDEN TESTS region and
    of `tests/hidden/**`: such a line stays secret wherever else it appears (outside a region, a
    markdown cell of the solution notebook, tests/public, the grader). Only a line marked
    `# grader: public` where it is written is left out; the mark is not part of the line
    compared. Other files under `solutions/` (a backup copy, a reference implementation) are
    secret so that they cannot ride along; their lines that the release's scaffold ships anyway
    (outside every region of a solution notebook, and no region's line) reveal nothing and are
    left out."""
    from grader.core.course import load_course

    root = Path(root).resolve()
    secrets: dict[str, str] = {}  # regions and hidden tests
    strays: dict[str, str] = {}  # other files under solutions/
    scaffold: set[str] = set()
    public: set[str] = set()
    ids = load_course(root).assignment_ids
    notebooks = {(root / "solutions" / a / f"{a}.py").resolve() for a in ids}
    declared = _declared_data(root)

    def add(into: dict[str, str], lines: Sequence[str], origins: Sequence[str]) -> None:
        """`origins[k]`: where `lines[k]` comes from."""
        kept = zip(_marked_public(lines), _unmarked(lines, origins), strict=True)
        for (line, marked), origin in kept:
            s = line.strip()
            if marked:
                public.add(s)
            elif not is_generic(s):
                into.setdefault(s, origin)

    def numbered(prefix: str, lines: Sequence[str]) -> list[str]:
        return [f"{prefix}{n}" for n in range(1, len(lines) + 1)]

    sol = root / "solutions"
    for path in sorted(_files(sol).values()) if sol.is_dir() else []:
        rp = path.resolve()
        if rp in declared:
            continue
        rel = _rel(root, path)
        cells = _notebook_cells(path) if path.suffix in (".py", ".ipynb") else None
        if rp in notebooks and cells is not None:
            starts = _cell_starts(path, cells)
            for k, cell in enumerate(cells):
                inside, outside = _split_regions(cell.source)
                add(
                    secrets,
                    [line for _, line in inside],
                    [f"{rel}:{starts[k] + n + 1}" for n, _ in inside],
                )
                scaffold.update(x.strip() for x in outside)
            continue
        if cells is not None and path.suffix == ".ipynb":
            for k, cell in enumerate(cells):
                lines = cell.source.split("\n")
                add(strays, lines, numbered(f"{rel} cell {k} line ", lines))
            continue
        lines = _text_lines(path) or []
        add(strays, lines, numbered(f"{rel}:", lines))
    for path in _files(root / "tests" / "hidden").values():
        lines = _text_lines(path) or []
        add(secrets, lines, numbered(f"{_rel(root, path)}:", lines))
    merged = {s: o for s, o in strays.items() if s not in scaffold}
    merged.update(secrets)
    for s in public:
        merged.pop(s, None)
    return merged, public


def _candidates(line: str) -> list[str]:
    s = line.strip()
    out = [s]
    bare = s.lstrip("#>").strip()
    if bare != s:
        out.append(bare)
    return out


def leak_check(root: Path, tree: Path) -> list[Leak]:
    """Every occurrence of a secret line (see the module docstring) in a text file under `tree`."""
    secrets, _ = secret_and_public_lines(root)
    tree = Path(tree)
    leaks: list[Leak] = []
    if not secrets:
        return leaks

    def hit(path: str, n: int, line: str, cell: int | None = None) -> None:
        for c in _candidates(line):
            if c in secrets:
                leaks.append(Leak(path, n, c, secrets[c], cell))
                return

    for rel, path in _all_files(tree):
        lines = _text_lines(path)
        if lines is None:
            continue
        if path.suffix == ".ipynb":
            try:
                nb = json.loads("\n".join(lines))
                cells = nb.get("cells", [])
            except (json.JSONDecodeError, AttributeError):
                cells = None
            if isinstance(cells, list):
                for k, cell in enumerate(cells):
                    for n, line in enumerate(_ipynb_texts(cell), start=1):
                        hit(rel, n, line, k)
                continue
        for n, line in enumerate(lines, start=1):
            hit(rel, n, line)
    return leaks


def _all_files(tree: Path):
    """Every file under tree (junk caches skipped, but .ipynb_checkpoints kept: it can leak)."""
    skip = JUNK_DIRS - {".ipynb_checkpoints"}
    for p in sorted(tree.rglob("*")):
        rel = p.relative_to(tree)
        if p.is_file() and not (set(rel.parts[:-1]) & skip):
            yield rel.as_posix(), p


def _ipynb_texts(cell) -> list[str]:
    def join(v) -> str:
        return "".join(v) if isinstance(v, list) else str(v or "")

    out = join(cell.get("source")).split("\n") if isinstance(cell, dict) else []
    for o in cell.get("outputs", []) if isinstance(cell, dict) else []:
        if isinstance(o, dict):
            out += join(o.get("text")).split("\n")
            data = o.get("data") if isinstance(o.get("data"), dict) else {}
            for key in ("text/plain", "text/markdown", "text/html"):
                out += join(data.get(key)).split("\n")
    return out


# --------------------------------------------------------------------------------------------
# Student export


def _student_grader(root: Path) -> list[Path]:
    pkg = root / "grader"
    ship, unknown = [], []
    for p in sorted(pkg.iterdir()):
        if p.name in JUNK_DIRS or p.name.startswith("."):
            continue
        if p.is_file() and p.suffix == ".py":
            name = p.stem
        elif p.is_dir() and (p / "__init__.py").exists():
            name = p.name
        else:
            ship.append(p)  # data: schema/, templates/
            continue
        if name in STUDENT_MODULES:
            ship.append(p)
        elif name not in INSTRUCTOR_MODULES:
            unknown.append(f"grader/{p.name}")
    if unknown:
        raise ExportError(
            [
                f"{u}: not classified; add it to STUDENT_MODULES or "
                "INSTRUCTOR_MODULES in grader/release/__init__.py"
                for u in unknown
            ]
        )
    return ship


def _copy(src: Path, dest: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns(*JUNK_DIRS, "*.pyc"))
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)


def export_student(root: Path, dest: Path) -> Path:
    """Write the repository students fork into `dest` (must not exist or be empty).

    Refuses (ExportError) when exercises/ is stale, a grader module is unclassified, or the leak
    proof finds anything; `dest` is then left as it was.
    """
    root = Path(root).resolve()
    dest = Path(dest).resolve()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ExportError([f"{dest}: exists and is not empty; choose a new directory"])
    rel = release(root, check=True)
    if not rel.ok:
        raise ExportError(
            [
                "exercises/ is not what release would write; run `grader release` first",
                *rel.findings,
            ]
        )
    readme = root / STUDENT_README
    if not readme.is_file():
        raise ExportError([f"{readme}: missing (the student README's source)"])
    grader_files = _student_grader(root)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".export-", dir=dest.parent) as tmp:
        out = Path(tmp) / "student"
        out.mkdir()
        _copy(root / "exercises", out / "exercises")
        public = root / "tests" / "public"
        if public.is_dir():
            _copy(public, out / "tests" / "public")
        else:
            (out / "tests" / "public").mkdir(parents=True)
        for extra in ("tests/conftest.py", "tests/__init__.py", "conftest.py"):
            if (root / extra).is_file():
                _copy(root / extra, out / extra)
        for p in grader_files:
            _copy(p, out / "grader" / p.name)
        for name in ("course.toml", "pyproject.toml"):
            _copy(root / name, out / name)
        _copy(readme, out / "README.md")
        (out / ".gitignore").write_text(STUDENT_GITIGNORE, encoding="utf-8")
        flows = root / STUDENT_WORKFLOWS
        if flows.is_dir():
            for wf in sorted([*flows.glob("*.yml"), *flows.glob("*.yaml")]):
                _copy(wf, out / ".github" / "workflows" / wf.name)
        for forbidden in ("solutions", "tests/hidden", "tests/unit"):
            if (out / forbidden).exists():  # cannot happen; kept as a tripwire
                raise ExportError([f"{forbidden}/ would be exported"])
        leaks = leak_check(root, out)
        if leaks:
            raise ExportError([f"leak: {lk}" for lk in leaks])
        if dest.exists():
            dest.rmdir()
        os.replace(out, dest)
    return dest


# --------------------------------------------------------------------------------------------
# verify


def _solution_ipynbs(root: Path, ids: Sequence[str], work: Path) -> dict[str, Path]:
    """Convert each solution source to an .ipynb inside a scratch course tree `work`."""
    import jupytext

    shutil.copyfile(root / "course.toml", work / "course.toml")
    out = {}
    for a in ids:
        src = root / "solutions" / a / f"{a}.py"
        folder = work / "solutions" / a
        folder.mkdir(parents=True)
        for data in _data_files(root, a):
            _copy(data, folder / data.relative_to(src.parent))
        nb = jupytext.read(src)
        path = folder / f"{a}.ipynb"
        path.write_text(jupytext.writes(nb, fmt="ipynb"), encoding="utf-8")
        out[a] = path
    return out


def _validate(path: Path, invert: bool, timeout: int) -> dict:
    from nbgrader.validator import Validator

    from grader.core.kernels import ipc_kernel_config

    with ipc_kernel_config() as cfg:  # no TCP kernel, no "without encryption" warning
        cfg.Execute.timeout = timeout
        return Validator(invert=invert, config=cfg).validate(str(path))


def _first(text: str, n: int = 100) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= n else line[: n - 3] + "..."


RULES_HEADING = "Stated rules"
_RULE = re.compile(r'^- (test_\w+): "(.*?)"[ \t]*$', re.MULTILINE | re.DOTALL)


def _words(text: str) -> str:
    return " ".join(text.split())


def stated_rules(root: Path, assignment_id: str) -> tuple[list[str], int]:
    """Every hidden test of an assignment quotes the student-facing sentence that states its rule.

    The table lives in each hidden test module's docstring, under a line starting with
    `RULES_HEADING`, one entry per test: ``- test_name: "a sentence of the notebook"`` (wrapped
    freely). Each quote must appear word for word (whitespace aside) in the released notebook,
    markdown or code, so a hidden test can never check a rule a student could not have read.
    Returns (problems, number of hidden tests checked).
    """
    from grader.core.notebook import NotebookError, read_notebook

    notebook = root / "exercises" / assignment_id / f"{assignment_id}.ipynb"
    try:
        text = _words("\n".join(c.source for c in read_notebook(notebook).cells))
    except NotebookError as exc:
        return [f"cannot read the released notebook: {exc}"], 0
    problems: list[str] = []
    count = 0
    for path in sorted((root / "tests" / "hidden" / assignment_id).glob("test_*.py")):
        where = _rel(root, path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        tests = [
            n.name
            for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test_")
        ]
        count += len(tests)
        doc = ast.get_docstring(tree) or ""
        table = doc.split(RULES_HEADING, 1)[1] if RULES_HEADING in doc else ""
        quotes = {name: _words(quote) for name, quote in _RULE.findall(table)}
        for name in tests:
            if name not in quotes:
                problems.append(
                    f"{where}::{name} is not listed under '{RULES_HEADING}' in the module "
                    'docstring (add: - NAME: "the notebook sentence that states its rule")'
                )
            elif not quotes[name] or quotes[name] not in text:
                problems.append(
                    f"{where}::{name}: its quoted rule is not in {_rel(root, notebook)}: "
                    f"{_first(quotes[name], 120)!r}"
                )
        problems += [
            f"{where}: '{RULES_HEADING}' lists {name}, which is not a test in the module"
            for name in sorted(set(quotes) - set(tests))
        ]
    return problems, count


def verify(root: Path) -> VerifyReport:
    """The instructor's one-stop check (see the issue): `ok` is False on any finding."""
    from grader.core import device
    from grader.core.course import load_course

    t0 = time.perf_counter()
    root = Path(root).resolve()
    course = load_course(root)
    report = VerifyReport()
    rel = release(root, check=True)
    report.add("release in sync", "all", rel.findings, "exercises/ matches solutions/")
    try:
        from grader.suites.runner import run_assignment
    except ImportError as exc:
        run_assignment = None
        report.add("suites", "all", [f"grader.suites.runner unavailable: {exc}"], "")
    for a in course.assignments:
        problems, checked = stated_rules(root, a.id)
        report.add(
            "hidden rules stated",
            a.id,
            problems,
            f"{checked} hidden tests, each quoting the notebook sentence that states its rule",
        )
    device.prepare_numba()  # kernels executed by nbgrader validate run in the simulator on CPU
    timeout = int(max(120, course.limits.kernel_timeout_s))
    with tempfile.TemporaryDirectory(prefix="grader-verify-") as tmp:
        work = Path(tmp)
        (work / "sol").mkdir()
        sol_nbs = _solution_ipynbs(root, course.assignment_ids, work / "sol")
        empty_metrics = work / "empty-metrics.json"
        empty_metrics.write_text("{}\n", encoding="utf-8")
        for a in course.assignments:
            # 1. the solution notebook passes nbgrader validate (and, as a student would, writes
            #    metrics.json into the scratch course root, which grades the solution below)
            try:
                res = _validate(sol_nbs[a.id], invert=False, timeout=timeout)
                probs = [
                    f"cell fails on the solution: {_first(c['source'])} -> "
                    f"{_first(c.get('raw_error', ''))}"
                    for c in res.get("failed", [])
                ]
                probs += [
                    f"{k}: {_first(c['source'])}"
                    for k in ("changed", "type_changed")
                    for c in res.get(k, [])
                ]
            except Exception as exc:  # noqa: BLE001 - reported as a finding
                probs = [f"nbgrader validate could not run: {type(exc).__name__}: {exc}"]
            report.add("solution passes nbgrader validate", a.id, probs, "all graded cells pass")
            # 2. the released notebook fails it (nbgrader validate --invert passes)
            released = root / "exercises" / a.id / f"{a.id}.ipynb"
            if released.is_file():
                stub_dir = work / "stub" / "exercises" / a.id
                stub_dir.mkdir(parents=True)
                shutil.copyfile(root / "course.toml", work / "stub" / "course.toml")
                for name, p in _files(released.parent).items():
                    _copy(p, stub_dir / name)
                try:
                    res = _validate(stub_dir / released.name, invert=True, timeout=timeout)
                    probs = [
                        f"graded cell passes on the stub: {_first(c['source'])}"
                        for c in res.get("passed", [])
                    ]
                    probs += [
                        f"{k}: {_first(c['source'])}"
                        for k in ("changed", "type_changed")
                        for c in res.get(k, [])
                    ]
                except Exception as exc:  # noqa: BLE001
                    probs = [
                        f"nbgrader validate --invert could not run: {type(exc).__name__}: {exc}"
                    ]
            else:
                probs = [f"exercises/{a.id}/{a.id}.ipynb missing; run grader release"]
            report.add("stub fails nbgrader validate", a.id, probs, "validate --invert passes")
            if run_assignment is None:
                continue
            # 3. the solutions score full marks; every test carries points; totals match
            metrics = work / "sol" / "metrics.json"
            sol = run_assignment(
                root,
                a.id,
                root / "solutions",
                metrics if metrics.is_file() else empty_metrics,
                suites=("public", "hidden"),
            )
            probs = [f"suites could not run: {_first(sol.error, 300)}"] if sol.error else []
            skipped = [t.name for t in sol.tests if t.outcome == "skipped"]
            for t in sol.tests:
                if t.outcome != "skipped" and t.score < t.max_score - 1e-9:
                    probs.append(
                        f"{t.name}: {t.outcome} ({t.score:g}/{t.max_score:g}) {_first(t.feedback)}"
                    )
            report.add(
                "solution scores full marks",
                a.id,
                probs,
                f"{sol.score:g}/{sol.max_score:g}"
                + (f" ({len(skipped)} GPU test(s) skipped)" if skipped else ""),
            )
            if skipped:
                report.notes.append(f"{a.id}: skipped without a GPU: {', '.join(skipped)}")
            probs = [f"{t.name} carries no points" for t in sol.tests if t.max_score <= 0]
            total = sum(t.max_score for t in sol.tests)
            if abs(total - a.points) > 1e-6:
                by = {
                    s: sum(t.max_score for t in sol.tests if t.suite == s)
                    for s in ("public", "hidden")
                }
                probs.append(
                    f"tests total {total:g} points (public {by['public']:g} + hidden "
                    f"{by['hidden']:g}); course.toml says {a.points:g}"
                )
            report.add("points match course.toml", a.id, probs, f"{total:g} = {a.points:g} points")
            # 4. the stubs score zero on every graded test
            stub = run_assignment(
                root, a.id, root / "exercises", empty_metrics, suites=("public", "hidden")
            )
            probs = (
                [f"suites could not run on the stubs: {_first(stub.error, 300)}"]
                if stub.error
                else []
            )
            probs += [
                f"vacuous test {t.name}: scores {t.score:g}/{t.max_score:g} on the stub"
                for t in stub.tests
                if t.score > 0
            ]
            report.add(
                "stubs score zero",
                a.id,
                probs,
                f"0/{stub.max_score:g} on {len(stub.tests)} test(s)",
            )
    report.seconds = time.perf_counter() - t0
    return report
