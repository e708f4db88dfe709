"""The leak proof: no secret line of an assignment reaches a released tree.

Secret lines (`secret_and_public_lines`), each secret for the assignment that holds it: every
line inside a SOLUTION or HIDDEN TESTS region of its solution notebook (the regions as
`grader.core.regions` scans them; a cell whose markers do not pair up is secret whole), every
line of `tests/hidden/<id>/**` but its files' module docstrings (which quote the released
notebook word for word, `grader.release.verify.stated_rules`; a file directly under
tests/hidden belongs to the whole course), and every line of other files under `solutions/<id>/`
(except the declared data files). A line is not secret when:

* it is *generic* (`is_generic`, with or without its trailing comment): blank; a comment; an
  nbgrader marker; an import statement; shorter than 8 characters (`return`, `pass`, `else:`,
  `try:`, `break`, `)`, a lone triple quote); or naming fewer than two things once Python
  keywords and `None/True/False/self/cls` are left out (`return None`, `except ValueError:`);
* it is an *idiom* (`is_idiom`, read with Python's `tokenize`): one name bound to a short
  expression, at most `IDIOM_TOKENS` tokens with no arithmetic or comparison operator, such
  as ``tid = cuda.threadIdx.x`` or ``i = cuda.grid(1)``, which every kernel's text holds and
  a markdown hint may show (a block of them the grader package holds still counts, below);
* the instructor marked it public where it is written: a trailing `# grader: public` comment
  (optionally followed by why, in parentheses), or a line holding only that mark just above it;
* it is a hidden test's line that the same assignment's public tests hold too (the instructor
  shows it there), or test boilerplate (`is_boilerplate`: a decorator whose arguments are all
  literals, such as ``@pytest.mark.points(3)`` or ``@pytest.fixture``, a plain ``def`` line);
  a solution's line is no test line: pasted into the public tests, it still leaks;
* the grader package the student repository ships holds it too (`grader.release.tree`'s
  `STUDENT_MODULES`: what students get anyway, such as ``if i < x.size:``), unless it is one of
  `GRADER_RUN` or more such lines in a row: a block pasted into the package is still secret.

So the secrets of one assignment are not another's exemptions: a line that assignment A's public
tests hold is still secret for B when B's hidden tests hold it and B's public tests do not.
There is no public-by-default escape: a secret line that also appears outside a region, in a
markdown cell or in another assignment's public tests is still secret, so pasting it there is a
leak. Only the lines of stray files under `solutions/` that the release's scaffold ships anyway
are excused. Every refusal says how to fix it (`Leak.fix`).

Matching sees through rewording (`SecretIndex`, on `grader.release.normalise`'s token streams;
a solution's line long and particular enough is compared by its shape, every name renamed,
unless the solution notebook's own code outside its regions shows that shape, as a self-check
that computes the same grid size with its own names does):
comments, whitespace, backticks and quotes do not count, a solution's line of code is found
inside any text (after "Example: ", in inline code, with a comment appended, with a variable
renamed), and long base64 or hex strings (gzip inside or not) are decoded and searched too.
`leak_check` checks every text file under the scanned tree (the staged release, the public
suites, the export): cell sources and text outputs for `.ipynb`, the whole text otherwise. A
`.ipynb_checkpoints` folder is scanned too: it can leak. Release, verify (through release's
check, and the export it runs) and export-student run this one proof.
"""

from __future__ import annotations

import ast
import io
import json
import keyword
import re
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jupytext
import numpy as np

from grader.core.course import load_course
from grader.core.regions import MARKERS, scan
from grader.release.normalise import (
    NAME,
    NUMBER,
    Stream,
    decoded,
    same_code,
    strip_comment,
    tokens,
)
from grader.release.tree import JUNK_DIRS, rel_name, student_grader, tree_files
from grader.release.validate import cell_ranges, declared_data

if TYPE_CHECKING:
    from nbformat import NotebookNode

MIN_LINE_CHARS = 8
IDIOM_TOKENS = 8  # `tid = cuda.threadIdx.x` (7), `i = cuda.grid(1)` (8): one-token idioms
# Python's operator tokens that only bind, group or separate (not arithmetic or comparison)
_PLAIN_OPS = frozenset({"=", ".", ",", "(", ")", "[", "]", "{", "}", ":", ";", "->"})
GRADER_RUN = 3  # this many secret lines in a row that the grader package holds too: a paste
# Decorators called with literals that say how a test runs (points, fixture scope, hypothesis
# settings), never what it checks
RUNNER_DECORATORS = frozenset({"points", "fixture", "settings", "usefixtures", "filterwarnings"})
MIN_CODE_TOKENS = 6  # a solution's line of code this long is matched anywhere in a text
MIN_TEST_TOKENS = 12  # a hidden test's line, which shares boilerplate with the public tests
MIN_OPERATORS = 2  # ... when it has this many operators outside its strings
_OPERATORS = frozenset("=+-*/%<>!&|^~@.")
MAX_SCAN_BYTES = 20 * 1024 * 1024
# The mark, optionally followed by why in parentheses: "# grader: public (stated in the text)".
_PUBLIC_MARK_RE = re.compile(r"#\s*grader:\s*public(\s*\([^)]*\))?\s*$")
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
    encoded: str = ""  # how the text it was found in was encoded ("base64", "hex of gzip"...)

    @property
    def fix(self) -> str:
        """What the instructor does about it, said with the places to do it."""
        if self.origin.startswith("tests/hidden/"):
            return (
                f"take it out of {self.path}; or, if students may see it, let the public tests "
                f"of the same assignment hold it too, or end the line at {self.origin} with "
                "`# grader: public`"
            )
        return (
            f"take it out of {self.path}; or, if it is meant to be public, end the line at "
            f"{self.origin} with `# grader: public`"
        )

    def __str__(self) -> str:
        where = (
            f"{self.path}:{self.line}"
            if self.cell is None
            else (f"{self.path} cell {self.cell + 1} line {self.line}")  # as nbformat counts
        )
        inside = f" inside a {self.encoded} string" if self.encoded else ""
        return f"{where}: leaked {self.text!r}{inside} (secret from {self.origin}); fix: {self.fix}"


def is_generic(line: str) -> bool:
    """True for a line too generic to reveal anything (see the module docstring)."""
    s = line.strip()
    if len(s) < MIN_LINE_CHARS or s.startswith("#") or any(m in s for m in MARKERS):
        return True
    if _IMPORT_RE.match(s):
        return True
    names = [t for t in _WORD_RE.findall(s) if t not in _GENERIC_WORDS]
    return len(names) < 2


def is_idiom(line: str) -> bool:
    """True for one name bound to a short expression: at most `IDIOM_TOKENS` tokens (`tokenize`:
    a name or a number is one token), no arithmetic or comparison operator and no string, such
    as ``tid = cuda.threadIdx.x``: a shape every kernel holds, no secret (see the module
    docstring). A line `tokenize` cannot read (half a bracket) is no idiom."""
    try:
        found = list(tokenize.generate_tokens(io.StringIO(strip_comment(line).strip()).readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    skip = {tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT, tokenize.INDENT}
    kept = [t for t in found if t.type not in skip]
    if any(t.type == tokenize.ERRORTOKEN for t in kept):
        return False
    operators = [t for t in kept if t.type == tokenize.OP and t.string not in _PLAIN_OPS]
    strings = [t for t in kept if t.type == tokenize.STRING]
    one_name = len(kept) > 2 and kept[0].type == tokenize.NAME and kept[1].string == "="
    return one_name and len(kept) <= IDIOM_TOKENS and not operators and not strings


def is_boilerplate(line: str) -> bool:
    """A test's line that says how a test runs, not what it checks: a decorator without a call
    (``@pytest.fixture``, ``@pytest.mark.gpu``, ``@FAST``) or a call of `RUNNER_DECORATORS`
    with literal arguments only (``@pytest.mark.points(3)``, ``@pytest.fixture(scope="module")``),
    or a ``def`` line whose defaults are all literals. A decorator that carries the test's data
    (``@pytest.mark.parametrize(...)``, ``@example(...)``, ``@given(...)``) is no boilerplate."""
    s = strip_comment(line).strip()
    if s.startswith("@"):
        try:
            node = ast.parse(s[1:].strip(), mode="eval").body
        except SyntaxError:
            return False
        if isinstance(node, ast.Call):
            values = [*node.args, *(k.value for k in node.keywords)]
            name = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if isinstance(node.func, ast.Name):
                name = node.func.id
            literal = all(isinstance(v, ast.Constant) for v in values)
            if name not in RUNNER_DECORATORS or not literal:
                return False
            node = node.func
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name)
    if s.startswith(("def ", "async def ")) and s.endswith(":"):
        try:
            fn = ast.parse(s + "\n    pass").body[0]
        except SyntaxError:
            return False
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            return False
        defaults = [*fn.args.defaults, *(d for d in fn.args.kw_defaults if d is not None)]
        return all(isinstance(d, ast.Constant) for d in defaults)
    return False


def _form(line: str) -> tuple[str, ...]:
    """A line as the leak proof compares whole lines: its code tokens, comment dropped."""
    return tuple(tokens(strip_comment(line), code=True).tokens)


def _forms(paths: Iterable[Path]) -> set[tuple[str, ...]]:
    """The `_form` of every non-generic line of these files."""
    out: set[tuple[str, ...]] = set()
    for path in paths:
        for line in _text_lines(path) or []:
            if not is_generic(line):
                out.add(_form(line))
    return out


def _shipped_forms(root: Path) -> set[tuple[str, ...]]:
    """The lines of the grader package that the student repository ships (its Python files)."""
    ship, _ = student_grader(root)
    files = [p for entry in ship for p in ([entry] if entry.is_file() else entry.rglob("*.py"))]
    return _forms(p for p in files if p.suffix == ".py" and not set(p.parts) & JUNK_DIRS)


def _text_lines(path: Path) -> list[str] | None:
    try:
        if path.stat().st_size > MAX_SCAN_BYTES:
            return None
        return path.read_bytes().decode("utf-8").splitlines()
    except (UnicodeDecodeError, OSError):
        return None


def _notebook_cells(path: Path) -> list[NotebookNode] | None:
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


def _cell_starts(path: Path, cells: Sequence[NotebookNode]) -> list[int]:
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


def secret_and_public_lines(root: Path) -> tuple[dict[str, str], set[str], set[tuple]]:
    """(secret line -> where it comes from, lines the instructor marked public at their source,
    the shapes (`shape_key`) of the code the solution notebooks show outside their regions).

    Each assignment's secrets are its own (the module docstring): the lines of its SOLUTION and
    HIDDEN TESTS regions, of `tests/hidden/<id>/**` and of other files under `solutions/<id>/`,
    less the generic lines, the marked ones, the grader package's (`_shipped_forms`, a block of
    `GRADER_RUN` such lines in a row excepted) and, for a hidden test's line, boilerplate and
    the lines of the same assignment's `tests/public/<id>/**`. The mark is not part of the line
    compared. Other files under `solutions/` (a backup copy, a reference implementation) are
    secret so that they cannot ride along; their lines that the release's scaffold ships anyway
    (outside every region of a solution notebook, and no region's line) reveal nothing and are
    left out.

    Long because the three kinds of source (solution notebooks, other files under solutions/,
    tests/hidden) share the `add` rule and the public marks, and are merged in one place."""
    root = Path(root).resolve()
    secrets: dict[str, str] = {}  # regions and hidden tests
    strays: dict[str, str] = {}  # other files under solutions/
    scaffold: set[str] = set()
    shown: set[tuple] = set()  # shapes of code lines outside every region (self-checks...)
    public: set[str] = set()
    holders: dict[str, list[str]] = {}  # every place a secret line is written, for `origin_for`
    ids = load_course(root).assignment_ids
    notebooks = {(root / "solutions" / a / f"{a}.py").resolve() for a in ids}
    declared = declared_data(root)
    shipped = _shipped_forms(root)
    public_tests: dict[str, set[tuple[str, ...]]] = {}

    def shown_by_public_tests(owner: str, form: tuple[str, ...]) -> bool:
        """Whether the public tests of `owner` (an assignment; "" for the course) hold it."""
        if owner not in public_tests:
            folder = root / "tests" / "public"
            files = (
                tree_files(folder / owner).values()
                if owner
                else [p for p in folder.glob("*") if p.is_file()]
            )
            public_tests[owner] = _forms(files)
        return form in public_tests[owner]

    def add(
        into: dict[str, str], lines: Sequence[str], origins: Sequence[str], owner: str | None
    ) -> None:
        """`origins[k]`: where `lines[k]` comes from; `owner`: the assignment whose hidden
        tests these are (None for a solution's lines, which no public test excuses)."""
        run: list[tuple[str, str]] = []  # consecutive secret lines the grader package holds

        def close_run() -> None:
            if len(run) >= GRADER_RUN:  # a block pasted into the package stays secret
                for line, origin in run:
                    into.setdefault(line, origin)
                    holders.setdefault(line, []).append(origin)
            run.clear()

        kept = zip(_marked_public(lines), _unmarked(lines, origins), strict=True)
        for (line, marked), origin in kept:
            s = line.strip()
            if marked:
                public.add(s)
                continue
            if is_generic(s) or is_generic(strip_comment(s)):
                continue
            form = _form(s)
            if owner is not None and (is_boilerplate(s) or shown_by_public_tests(owner, form)):
                continue
            if form in shipped:
                run.append((s, origin))
                continue
            close_run()
            if not is_idiom(s):
                into.setdefault(s, origin)
                holders.setdefault(s, []).append(origin)
        close_run()

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
                    None,
                )
                scaffold.update(x.strip() for x in outside)
                if cell.cell_type == "code":
                    shown.update(shape_key(x) for x in outside if not is_generic(x))
            continue
        if cells is not None and path.suffix == ".ipynb":
            for k, cell in enumerate(cells):
                lines = cell.source.split("\n")
                add(strays, lines, numbered(f"{rel} cell {k} line ", lines), None)
            continue
        lines = _text_lines(path) or []
        add(strays, lines, numbered(f"{rel}:", lines), None)
    hidden = root / "tests" / "hidden"
    for name, path in tree_files(hidden).items():
        lines = _text_lines(path) or []
        skip = _module_docstring(lines) if path.suffix == ".py" else range(0)
        kept = [line for n, line in enumerate(lines) if n not in skip]
        rel = rel_name(root, path)
        origins = [f"{rel}:{n + 1}" for n in range(len(lines)) if n not in skip]
        owner = name.split("/", 1)[0] if "/" in name else ""
        add(secrets, kept, origins, owner)
    merged = {s: o for s, o in strays.items() if s not in scaffold}
    merged.update(secrets)
    for s in public:
        merged.pop(s, None)
    merged = {s: origin_for(holders.get(s, [o]), "") for s, o in merged.items()}
    return merged, public, shown


def shape_key(line: str) -> tuple[str, ...]:
    """A line of code with its renamable names, numbers and string words abstracted: what a
    secret line compared by its shape (`grader.release.normalise`) is compared on."""
    stream = tokens(line, code=True)
    return tuple(
        NAME if r else "" if not c else NUMBER if t[0].isdigit() else t
        for t, r, c in zip(stream.tokens, stream.renamable, stream.code, strict=True)
    )


def origin_for(origins: Sequence[str], found_in: str) -> str:
    """Of the places a secret line is written, the one a fix names for a leak found in the
    file `found_in`: one of the same assignment (`exercises/<id>/...`, `tests/public/<id>/...`
    against `solutions/<id>/...`, `tests/hidden/<id>/...`), else the first. Each place is
    separated from the next by ``\0`` when several hold it (`secret_and_public_lines`)."""
    places = [p for o in origins for p in o.split("\0")]
    parts = found_in.split("/")
    ids = {parts[1]} if len(parts) > 2 and parts[0] in ("exercises", "solutions") else set()
    if len(parts) > 3 and parts[:2] == ["tests", "public"]:
        ids = {parts[2]}
    for place in places:
        bits = place.split("/")
        if ids & {bits[1] if len(bits) > 1 else "", bits[2] if len(bits) > 2 else ""}:
            return place
    return "\0".join(dict.fromkeys(places)) if not found_in else places[0]


def _module_docstring(lines: Sequence[str]) -> range:
    """0-based lines of a Python file's module docstring (empty if none or unparsable).

    A hidden test file's docstring quotes, word for word, the released notebook's sentence for
    each rule it checks (`grader.release.verify.stated_rules`): public text by construction."""
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return range(0)
    first = tree.body[0] if tree.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return range(first.lineno - 1, first.end_lineno or first.lineno)
    return range(0)


def _all_files(tree: Path) -> Iterator[tuple[str, Path]]:
    """Every file under tree (junk caches skipped, but .ipynb_checkpoints kept: it can leak)."""
    skip = JUNK_DIRS - {".ipynb_checkpoints"}
    for p in sorted(tree.rglob("*")):
        rel = p.relative_to(tree)
        if p.is_file() and not (set(rel.parts[:-1]) & skip):
            yield rel.as_posix(), p


def _ipynb_texts(cell: Any) -> list[str]:
    def join(v: Any) -> str:
        return "".join(v) if isinstance(v, list) else str(v or "")

    out = join(cell.get("source")).split("\n") if isinstance(cell, dict) else []
    for o in cell.get("outputs", []) if isinstance(cell, dict) else []:
        if isinstance(o, dict):
            out += join(o.get("text")).split("\n")
            data: Any = o.get("data") if isinstance(o.get("data"), dict) else {}
            for key in ("text/plain", "text/markdown", "text/html"):
                out += join(data.get(key)).split("\n")
    return out


class SecretIndex:
    """The secret lines as token streams (`grader.release.normalise`), found in any text.

    A secret line of code (at least `MIN_CODE_TOKENS` tokens for a solution's line and
    `MIN_TEST_TOKENS` for a hidden test's, `MIN_OPERATORS` of them operators outside its
    strings) matches any window of a text's token stream that is the same code (`same_code`;
    names may be renamed only in a solution's line, since a public test calling the same
    function as a hidden one is no leak). Windows are found by one rolling hash of the
    skeleton per secret length (numpy), then checked token by token. Any other secret line
    (mostly words, like a hidden test's message, which the notebook states in the same words)
    matches a whole line of text with the same tokens. A secret that a `# grader: public` line
    has the same tokens as is public too: the mark covers the code, not its spacing.
    """

    def __init__(
        self, secrets: dict[str, str], public: set[str], shown: AbstractSet[tuple] = frozenset()
    ):
        public_forms = {tuple(tokens(p, code=True).tokens) for p in public}
        self.shown = shown  # shapes the solutions show in their own code: matched by name
        self.vocab: dict[str, int] = {NAME: 1}
        self.windows: dict[int, dict[tuple[str, ...], list[tuple[Stream, str, str]]]] = {}
        self.lines: dict[tuple[str, ...], tuple[str, str]] = {}
        for text, origin in secrets.items():
            stream = tokens(text, code=True)
            form = tuple(stream.tokens)
            if not form or form in public_forms:
                continue
            solution = origin.startswith("solutions/")
            if not solution:
                stream.renamable = [False] * len(form)
            operators = sum(t in _OPERATORS and c for t, c in zip(form, stream.code, strict=True))
            shortest = MIN_CODE_TOKENS if solution else MIN_TEST_TOKENS
            if len(form) < shortest or operators < MIN_OPERATORS:
                self.lines.setdefault(form, (text, origin))
                continue
            skeleton = stream.skeleton()
            for t in skeleton:
                self.vocab.setdefault(t, len(self.vocab) + 1)
            self.windows.setdefault(len(form), {}).setdefault(skeleton, []).append(
                (stream, text, origin)
            )
        longest = max(self.windows, default=0)
        rng = np.random.default_rng(24)
        self._weights = rng.integers(1, 1 << 62, size=longest, dtype=np.int64)
        self._hashes = {  # sorted, for searchsorted
            n: np.sort([self._hash(np.array(self._ids(k), np.int64), n)[0] for k in keys])
            for n, keys in self.windows.items()
        }

    def __bool__(self) -> bool:
        return bool(self.windows or self.lines)

    def _ids(self, skeleton: Sequence[str]) -> list[int]:
        return [self.vocab.get(t, 0) for t in skeleton]

    def _hash(self, ids: np.ndarray, n: int) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.correlate(ids, self._weights[:n], "valid")

    def find(self, text: str) -> Iterator[tuple[int, str, str]]:
        """(line, secret, origin) for each place in `text` that holds a secret line."""
        stream = tokens(text)
        if self.lines:
            by_line: dict[int, list[str]] = {}
            for t, n in zip(stream.tokens, stream.lines, strict=True):
                by_line.setdefault(n, []).append(t)
            for n, toks in by_line.items():
                found = self.lines.get(tuple(toks))
                if found:
                    yield n, found[0], found[1]
        if not stream.tokens or not self.windows:
            return
        ids = np.array(self._ids(stream.skeleton()), np.int64)
        for n, keys in self.windows.items():
            if n > len(ids):
                continue
            hashes = self._hash(ids, n)
            known = self._hashes[n]
            at = np.minimum(np.searchsorted(known, hashes), len(known) - 1)
            for s in np.flatnonzero(known[at] == hashes).tolist():
                for secret, text_, origin in keys.get(stream.skeleton(s, s + n), ()):
                    shape = origin.startswith("solutions/") and secret.shape
                    shape = shape and shape_key(text_) not in self.shown
                    if same_code(secret, stream, s, shape):
                        yield stream.lines[s], text_, origin


def _texts(path: Path) -> Iterator[tuple[int | None, str]]:
    """(cell index or None, text) of each text a file shows: a notebook's cell sources and
    text outputs one by one, any other text file whole."""
    lines = _text_lines(path)
    if lines is None:
        return
    if path.suffix == ".ipynb":
        try:
            cells = json.loads("\n".join(lines)).get("cells", [])
        except (json.JSONDecodeError, AttributeError):
            cells = None
        if isinstance(cells, list):
            for k, cell in enumerate(cells):
                yield k, "\n".join(_ipynb_texts(cell))
            return
    yield None, "\n".join(lines)


def _hits(index: SecretIndex, text: str) -> Iterator[tuple[int, str, str, str]]:
    """(line, secret, origin, how) in `text` and in what its long encoded strings decode to."""
    for line, secret, origin in index.find(text):
        yield line, secret, origin, ""
    for offset, how, inner in decoded(text):
        line = text.count("\n", 0, offset) + 1
        for _, secret, origin in index.find(inner):
            yield line, secret, origin, how


def leak_check(root: Path, tree: Path, prefix: str = "") -> list[Leak]:
    """Every occurrence of a secret line (see the module docstring) in a text file under
    `tree`, named `prefix` + its path in the tree."""
    return leak_check_trees(root, {prefix: tree})


def leak_check_trees(root: Path, trees: dict[str, Path]) -> list[Leak]:
    """`leak_check` over several trees (prefix -> tree) with the secrets read once."""
    secrets, public, shown = secret_and_public_lines(root)
    leaks: list[Leak] = []
    if not secrets:
        return leaks
    index = SecretIndex(secrets, public, shown)
    if not index:
        return leaks
    for prefix, tree in trees.items():
        if not Path(tree).is_dir():
            continue
        for rel, path in _all_files(Path(tree)):
            seen: set[tuple] = set()
            for cell, text in _texts(path):
                for line, secret, origin, how in _hits(index, text):
                    key = (cell, line, secret, how)
                    if key not in seen:
                        seen.add(key)
                        where = prefix + rel
                        origin = origin_for([origin], where)
                        leaks.append(Leak(where, line, secret, origin, cell, how))
    return leaks
