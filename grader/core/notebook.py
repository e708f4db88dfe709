"""Reading a submission's notebook and turning it into the code the grader executes.

The graded module is every code cell in order except demos (tag ``demo``), nbgrader test cells
(the inline self-checks) and IPython magics or shell lines, so grading neither re-runs plots and
full-size timings nor stops at a self-check the student has not made pass yet.

The worker runs it cell by cell (`graded_cells`), as nbgrader does with errors allowed: each
`GradedCell` knows its place in the notebook and the line of the student's own file where it
starts (the .py's line; in an .ipynb the cell's index and the line within the cell), so that
every line number the student reads is one they can find.

Reading is bounded before jupytext runs (`check_bounds`: cells, source size; an .ipynb through the
bounded JSON reader first), because it runs in the trusted process before any sandbox or timeout.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from grader.core import bounded_parse
from grader.core.errors import SubmissionError
from grader.core.jsonread import JsonLimits, JsonReadError, loads_bounded

if TYPE_CHECKING:
    from nbformat import NotebookNode

DEMO_TAG = "demo"
# Bounds on a notebook before jupytext parses it (its cost grows faster than linearly in cells:
# 50,000 empty cells took 31 s). The course's notebooks have under 100 cells and 100 kB of source.
# jupytext's percent reader scans each character in Python, about 1.1 us each, in the trusted
# process: at 2 MiB that was 2.3 s, more than the trusted side's whole grading of the reference
# (1.7 s), so the bound on source is 1.25 MiB (1.4 s), a dozen times the course's notebooks.
MAX_CELLS = 1000
MAX_SOURCE_BYTES = 1280 * 1024
MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024  # the file, outputs included
# An .ipynb is JSON the student supplies: read with the bounded reader first (outputs included).
IPYNB_LIMITS = JsonLimits(max_bytes=MAX_NOTEBOOK_BYTES, max_depth=64, max_items=500_000)


class NotebookError(SubmissionError, ValueError):
    """A notebook that cannot be read; the message names the file and what to fix."""


def jupytext_module() -> ModuleType:
    """jupytext, imported without its Jupyter contents managers.

    jupytext's ``__init__`` imports them (jupyter_server, tornado, prometheus_client: 0.2-0.5 s
    in every process that reads a notebook: the grader, each sandbox worker, the PTX worker) and
    tolerates their absence; reading and writing never use them. Blocked only for this import,
    so an explicit ``import jupytext.sync_contentsmanager`` later still works.
    """
    if "jupytext" in sys.modules:
        return sys.modules["jupytext"]
    blocked = [m for m in _CONTENTS_MANAGERS if m not in sys.modules]
    for name in blocked:
        # import raises ImportError, which jupytext catches
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        import jupytext  # lazy: imported with its contents managers blocked (see above)
    finally:
        for name in blocked:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
    return jupytext


_CONTENTS_MANAGERS = ("jupytext.sync_contentsmanager", "jupytext.async_contentsmanager")


_RESTORE = "restore it from the release or re-download it from Colab"


def _ipynb_source_size(p: Path, data: bytes) -> tuple[int, int]:
    """(cells, source bytes) of an .ipynb, read with the bounded JSON reader."""
    try:
        nb = loads_bounded(data, p.name, IPYNB_LIMITS)
    except JsonReadError as exc:
        raise NotebookError(f"{p}: not a readable notebook ({exc}); {_RESTORE}") from exc
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise NotebookError(f"{p}: not a readable notebook (no list of cells); {_RESTORE}")
    size = 0
    for cell in cells:
        src = cell.get("source", "") if isinstance(cell, dict) else ""
        size += len(json.dumps(src)) if not isinstance(src, str) else len(src)
    return len(cells), size


def check_bounds(p: Path, text: str, data: bytes) -> None:
    """Refuse, before parsing, a notebook over MAX_CELLS cells or MAX_SOURCE_BYTES of source."""
    if p.suffix == ".ipynb":
        cells, size = _ipynb_source_size(p, data)
    else:
        cells, size = text.count("\n# %%") + text.startswith("# %%"), len(data)
    if cells > MAX_CELLS:
        raise NotebookError(
            f"{p}: {cells:,} cells, over the limit of {MAX_CELLS:,}; delete the cells you "
            f"added (empty ones included) or {_RESTORE}"
        )
    if size > MAX_SOURCE_BYTES:
        raise NotebookError(
            f"{p}: {size / 1e6:.1f} MB of cell source, over the "
            f"{MAX_SOURCE_BYTES / 1e6:.1f} MB limit; keep data out of the notebook's cells"
        )


# A line this long whose characters jupytext has nothing to find in reaches it as a short stand-in
# (`_stand_ins`); see STAND_IN_UNSAFE.
LONG_LINE = 4096
# jupytext's percent reader looks in each line for quotes (is the next line inside a string?),
# comments, magics (%, !, ?) and, at its start, cell markers and `def`/`class`. A line of
# printable ASCII without any of these characters changes none of that past its first few
# characters: a data literal pasted into a cell, whose million characters jupytext would scan
# one by one in Python, four times over (1.0 s of the trusted process for a 1 MB list).
STAND_IN_UNSAFE = frozenset("\"'#%!?\\")
STAND_IN_PREFIX = 64  # of the line's own characters the stand-in keeps: its start is what counts


def _stand_ins(text: str, key: str) -> tuple[str, dict[str, str]]:
    """`text` with each long, jupytext-inert line replaced by a short stand-in line that starts
    as it does; {stand-in: the line}. The stand-in ends with an index and the file's digest, so
    it can be no line of the file itself."""
    lines = text.splitlines(keepends=True)
    stood_in: dict[str, str] = {}
    for i, line in enumerate(lines):
        body = line.rstrip("\r\n")
        if (
            len(body) > LONG_LINE
            and body.isascii()
            and body.isprintable()
            and STAND_IN_UNSAFE.isdisjoint(body)
        ):
            stand_in = f"{body[:STAND_IN_PREFIX]} __grader_line_{i}_{key[:16]}__"
            stood_in[stand_in] = body
            lines[i] = stand_in + line[len(body) :]
    return ("".join(lines), stood_in) if stood_in else (text, {})


def _put_back(nb: NotebookNode, stood_in: dict[str, str]) -> None:
    """Each stand-in line of the parsed cells back to the line it stands for."""
    for cell in nb.cells:
        if any(s in cell.source for s in stood_in):
            cell.source = "\n".join(stood_in.get(x, x) for x in cell.source.split("\n"))


def read_notebook(path: Path | str) -> NotebookNode:
    """Read a percent-format .py or an .ipynb with jupytext; NotebookError if unreadable.

    Bounded before jupytext runs (`check_bounds`): at MAX_CELLS jupytext takes about 2 s on a
    busy 2-core machine (50,000 cells took 31 s).
    """
    jupytext = jupytext_module()

    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError as exc:
        raise NotebookError(f"{p}: file not found") from exc
    except OSError as exc:
        raise NotebookError(f"{p}: unreadable ({exc.strerror})") from exc
    if len(data) > IPYNB_LIMITS.max_bytes:
        raise NotebookError(
            f"{p}: {len(data) / 1e6:.1f} MB, over the {IPYNB_LIMITS.max_bytes / 1e6:.0f} MB "
            f"limit; clear the outputs (Edit > Clear all outputs) or {_RESTORE}"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"{p}: not UTF-8 text ({exc.reason}); save it as UTF-8") from exc
    check_bounds(p, text, data)
    fmt = "ipynb" if p.suffix == ".ipynb" else "py:percent"
    key = hashlib.sha256(data).hexdigest() if fmt == "py:percent" else ""
    if key in _PARSED:
        return copy.deepcopy(_PARSED[key])
    stood_in: dict[str, str] = {}
    if fmt == "py:percent":
        text, stood_in = _stand_ins(text, key)
    try:
        nb = jupytext.reads(text, fmt=fmt)
    except Exception as exc:  # jupytext/nbformat raise many types for a broken file
        raise NotebookError(
            f"{p}: not a readable notebook ({type(exc).__name__}: {str(exc)[:200]}); {_RESTORE}"
        ) from exc
    if stood_in:
        _put_back(nb, stood_in)
    if key:
        _PARSED[key] = copy.deepcopy(nb)
        while len(_PARSED) > PARSED_KEPT:
            _PARSED.pop(next(iter(_PARSED)))
    return nb


# jupytext's percent-format reader is slow (a 1.2 MB cell: about 1.3 s), and one grading reads each
# .py notebook three times (pairing, the kernels' source, the worker), so the last few parses are
# kept, keyed on the file's bytes: the same bytes are the same notebook, wherever they were read.
# Callers get a copy, so none of them can change what another is given. An .ipynb is JSON,
# quick to parse, and may hold large outputs, so it is never kept.
PARSED_KEPT = 4
_PARSED: dict[str, NotebookNode] = {}


def is_demo(cell: Any) -> bool:
    return DEMO_TAG in cell.get("metadata", {}).get("tags", [])


def is_test_cell(cell: Any) -> bool:
    nbg = cell.get("metadata", {}).get("nbgrader", {})
    return bool(nbg.get("grade")) and not nbg.get("solution")


def _strip_magics(source: str) -> str:
    lines = []
    for line in source.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            lines.append(line[: len(line) - len(stripped)] + "pass  # magic dropped by the grader")
        else:
            lines.append(line)
    return "\n".join(lines)


def graded_parts(nb: NotebookNode) -> list[tuple[int, str]]:
    """The graded cells: (index among all the notebook's cells, source with magics dropped)."""
    return [
        (i, _strip_magics(cell.source))
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and not is_demo(cell) and not is_test_cell(cell)
    ]


def graded_source(nb: NotebookNode) -> str:
    """The Python source the grader executes for a notebook (cells separated by blank lines)."""
    return "\n\n".join(text for _, text in graded_parts(nb)) + "\n"


@dataclass(frozen=True)
class GradedCell:
    """One code cell the grader executes.

    `index` is the cell's position in the notebook (0-based, markdown cells counted); `line` is
    the line of the student's .py where `source` starts (1 in an .ipynb, where `in_file` is
    False and lines count within the cell); `grade_id` is "" for a cell nbgrader does not track
    (the student's scratch cells). `code` (its position among the notebook's code cells, from 1)
    and `heading` (the last markdown heading above it) name it the way a student finds it in
    Jupyter, which numbers no cells (`cell_name`).
    """

    index: int
    source: str
    grade_id: str
    line: int
    in_file: bool
    code: int = 0
    heading: str = ""

    def where(self, filename: str) -> str:
        """Where the student finds this cell, e.g. ``lab.py line 201 (cell 'save_metric')`` or
        ``lab.ipynb code cell 27 (under "## 5. ..."; cell 'save_metric', starting `...`)``."""
        first = _clipped(next((ln.strip() for ln in self.source.splitlines() if ln.strip()), ""))
        tag = f"cell '{self.grade_id}'" if self.grade_id else "an untagged cell"
        if self.in_file:
            return f"{filename} line {self.line} ({tag}, starting `{first}`)"
        under = f'under "{self.heading}"; ' if self.heading else ""
        return f"{filename} code cell {self.code} ({under}{tag}, starting `{first}`)"


def cell_name(code: int, heading: str) -> str:
    """A cell of an .ipynb as the student finds it: ``code cell 27 (under "## 5. ...")``."""
    return f'code cell {code} (under "{heading}")' if heading else f"code cell {code}"


def _clipped(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def headings(nb: NotebookNode) -> list[tuple[int, str]]:
    """(position among the code cells from 1, the last markdown heading above) for each cell of
    `nb` (0 for a markdown cell): how a cell is named to a student (`cell_name`)."""
    out, code, heading = [], 0, ""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found = [ln.strip() for ln in cell.source.splitlines() if ln.lstrip().startswith("#")]
            heading = _clipped(found[-1]) if found else heading
        code += cell.cell_type == "code"
        out.append((code if cell.cell_type == "code" else 0, heading))
    return out


def graded_cells(
    nb: NotebookNode, text: str | None = None, every: bool = False, demos: bool = True
) -> list[GradedCell]:
    """The graded code cells of `nb` in order; `text`: the .py file it was read from, whose
    line numbers the cells then carry (None for an .ipynb); `every`: the self-checks and (unless
    not `demos`) the demos too, as Jupyter's "Run all" runs them (`grader run`)."""
    lines = text.splitlines() if text is not None else None
    markers = [i for i, ln in enumerate(lines or ()) if ln.startswith("# %%")]
    offset = len(nb.cells) - len(markers)  # 1 when a cell sits before the first marker
    named = headings(nb)
    cells, searched = [], 0
    for index, cell in enumerate(nb.cells):
        if lines is not None and 0 <= index - offset < len(markers):
            searched = max(searched, markers[index - offset] + 1)
        kept = (every and (demos or not is_demo(cell))) or not (is_demo(cell) or is_test_cell(cell))
        if cell.cell_type != "code" or not kept:
            continue
        line = 1
        if lines is not None:
            line = _start_line(lines, cell.source, searched)
            searched = max(searched, line - 1)
        nbg = cell.get("metadata", {}).get("nbgrader", {})
        grade_id = str(nbg.get("grade_id", "")) if isinstance(nbg, dict) else ""
        source = _strip_magics(cell.source)
        cells.append(GradedCell(index, source, grade_id, line, lines is not None, *named[index]))
    return cells


def _start_line(lines: list[str], source: str, start: int) -> int:
    """The 1-based line of `lines` where the cell `source` begins, searching from `start`
    (the line after its marker): its first non-blank line, found as written or commented out
    (jupytext comments magics in a .py)."""
    own = source.splitlines()
    k = next((i for i, ln in enumerate(own) if ln.strip()), None)
    if k is None:
        return start + 1
    want = own[k]
    for i in range(start, len(lines)):
        if lines[i] == want or lines[i] == "# " + want:
            return i - k + 1
    return start + 1


def read_graded_cells(
    path: Path | str, every: bool = False, demos: bool = True
) -> list[GradedCell]:
    """The graded cells of the notebook file at `path` (a .py's carry their lines of the file);
    with `every`, all its code cells (`graded_cells`); NotebookError if it cannot be read."""
    p = Path(path)
    nb = read_notebook(p)
    text = p.read_text(encoding="utf-8") if p.suffix != ".ipynb" else None
    return graded_cells(nb, text, every, demos)


def graded_text(path: Path | str) -> str:
    """The graded cells of a notebook file as one module, for the trusted side's `ast` reading
    (the kernels it extracts): in a .py each cell sits at its own lines of the file (the rest
    blank), so every line number is the student's; a cell that does not parse is left blank,
    so one syntax error costs only that cell's kernels (the worker reports it). Each cell is
    checked within `bounded_parse`'s bounds; a cell over them is kept, so that the extraction's
    parse of the whole text refuses it with the bound's message."""
    return cells_text(read_graded_cells(path))


def cells_text(cells: list[GradedCell]) -> str:
    """`graded_text` of cells already read (`read_graded_cells`)."""
    out: list[str] = []
    for cell in cells:
        own = cell.source.splitlines()
        if bounded_parse.compiles(cell.source) is False:  # over the bounds: kept, and named
            own = [""] * len(own)
        if cell.in_file:
            out += [""] * max(0, cell.line - 1 - len(out))
            out += own
        else:
            out += [*own, ""]
    return "\n".join(out) + "\n"


def notebook_paths(folder: Path, assignment_id: str) -> tuple[Path, Path]:
    """The pair of files of an assignment in a submission folder (either may be missing)."""
    base = Path(folder) / assignment_id
    return base / f"{assignment_id}.py", base / f"{assignment_id}.ipynb"


def choose_notebook(folder: Path, assignment_id: str) -> Path:
    """The file to run by hand: the .py if present, else the .ipynb (grading chooses in
    grader.grading.intake)."""
    py, ipynb = notebook_paths(folder, assignment_id)
    if py.is_file():
        return py
    if ipynb.is_file():
        return ipynb
    raise NotebookError(
        f"{py.parent}: neither {py.name} nor {ipynb.name} found; "
        "restore the assignment folder from the release"
    )
