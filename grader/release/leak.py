"""The leak proof: no line of a solution region and no hidden test reaches a released tree.

Secret lines (`secret_and_public_lines`): every line inside a SOLUTION or HIDDEN TESTS region of
the solution notebooks (the regions as `grader.core.regions` scans them; a cell whose markers do
not pair up is secret whole), every line of `tests/hidden/**`, and every line of other files
under `solutions/` (except the declared data files). Lines are compared stripped. A line is not
secret when it is *generic* (`is_generic`): blank; a comment; an nbgrader marker; an import
statement; shorter than 8 characters (`return`, `pass`, `else:`, `try:`, `break`, `)`, a lone
triple quote); or naming fewer than two things once Python keywords and
`None/True/False/self/cls` are left out (`return None`, `return total`, `except ValueError:`).

There is no public-by-default escape: a region's or a hidden test's line that also appears
outside a region, in a markdown cell, in `tests/public/**` or in a grader module is still secret,
so pasting it there is a leak. The instructor makes such a line public where it is written: a
trailing `# grader: public` comment, or a line holding only `# grader: public` just above it.
Only the lines of stray files under `solutions/` that the scaffold ships anyway are excused.

`leak_check` checks every text file under the scanned tree (the staged release, the export):
cell sources and text outputs for `.ipynb`, lines otherwise, also with a leading `#` removed so
a markdown cell of a `.py` is seen. A `.ipynb_checkpoints` folder is scanned too: it can leak.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import jupytext

from grader.core.course import load_course
from grader.core.regions import MARKERS, scan
from grader.release.tree import JUNK_DIRS, rel_name, tree_files
from grader.release.validate import cell_ranges, declared_data

MIN_LINE_CHARS = 8
MAX_SCAN_BYTES = 20 * 1024 * 1024
PUBLIC_MARK = "# grader: public"
_PUBLIC_MARK_RE = re.compile(r"#\s*grader:\s*public\s*$")
_GENERIC_WORDS = frozenset(keyword.kwlist) | {"None", "True", "False", "self", "cls"}
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?")
_IMPORT_RE = re.compile(
    r"^(import\s+[\w.]+(\s+as\s+\w+)?(\s*,\s*[\w.]+(\s+as\s+\w+)?)*"
    r"|from\s+[\w.]+\s+import\s+.+)$"
)


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
    try:
        text = path.read_text(encoding="utf-8")
        return jupytext.reads(text, fmt="ipynb" if path.suffix == ".ipynb" else "py:percent").cells
    except Exception:  # noqa: BLE001 - an unreadable file is scanned as plain lines instead
        return None


def _split_regions(source: str) -> tuple[list[tuple[int, str]], list[str]]:
    """(lines inside any region with their 0-based index, lines outside every region and its
    markers); every line is inside when the cell's markers do not pair up."""
    lines = source.split("\n")
    found, problems = scan(lines, first=0)
    if problems:
        return list(enumerate(lines)), []
    marked = {n for r in found for n in range(r.begin, r.end + 1)}
    inside = [(n, lines[n]) for r in found for n in range(r.begin + 1, r.end)]
    return inside, [line for n, line in enumerate(lines) if n not in marked]


def _cell_starts(path: Path, cells) -> list[int]:
    """0-based line of each cell's first body line in a percent .py (best effort)."""
    lines = _text_lines(path) or []
    ranges = cell_ranges(lines, len(cells))
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
    root = Path(root).resolve()
    secrets: dict[str, str] = {}  # regions and hidden tests
    strays: dict[str, str] = {}  # other files under solutions/
    scaffold: set[str] = set()
    public: set[str] = set()
    ids = load_course(root).assignment_ids
    notebooks = {(root / "solutions" / a / f"{a}.py").resolve() for a in ids}
    declared = declared_data(root)

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

    for path in sorted(tree_files(root / "solutions").values()):
        rp = path.resolve()
        if rp in declared:
            continue
        rel = rel_name(root, path)
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
    for path in tree_files(root / "tests" / "hidden").values():
        lines = _text_lines(path) or []
        add(secrets, lines, numbered(f"{rel_name(root, path)}:", lines))
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


def _all_files(tree: Path) -> Iterator[tuple[str, Path]]:
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
