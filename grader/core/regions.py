"""The nbgrader region markers, scanned once: where each SOLUTION and HIDDEN TESTS region is.

A region opens on a line holding ``BEGIN SOLUTION`` (``BEGIN HIDDEN TESTS``) and closes on the
next line holding the matching ``END``; the lines between are its body. Regions do not nest and
do not cross cells, so a scan is given the lines of one cell (or of a whole well-formed script,
whose regions all sit inside its cells). Lines are numbered from `first`
(1 for a cell's own lines, the file line of the cell's first line for a percent script), and
every position and message uses those numbers.

`scan` never raises: it returns the regions and every marker problem (unmatched BEGIN or END, a
BEGIN inside an open region, an END closing the other kind), recovering as it goes: a nested
BEGIN is ignored, an END of the other kind closes the open region, and a region still open when
the lines run out is returned with ``closed=False``, running to the last line. `regions` is the
strict form for a source already known to be well formed: the regions, or `RegionError` naming
the first problem's line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grader.core.errors import UsageError

SOLUTION = "SOLUTION"
HIDDEN_TESTS = "HIDDEN TESTS"
KINDS = (SOLUTION, HIDDEN_TESTS)
BEGIN_SOLUTION = f"BEGIN {SOLUTION}"
END_SOLUTION = f"END {SOLUTION}"
BEGIN_HIDDEN = f"BEGIN {HIDDEN_TESTS}"
END_HIDDEN = f"END {HIDDEN_TESTS}"
# Every nbgrader marker, the mark scheme's too: a line holding one reveals nothing by itself.
MARKERS = (
    BEGIN_SOLUTION,
    END_SOLUTION,
    BEGIN_HIDDEN,
    END_HIDDEN,
    "BEGIN MARK SCHEME",
    "END MARK SCHEME",
)


@dataclass(frozen=True)
class Region:
    """One region: `begin` and `end` are the line numbers of its BEGIN and END markers."""

    kind: str  # SOLUTION or HIDDEN_TESTS
    begin: int
    end: int  # the last line scanned when the region was never closed
    closed: bool = True

    def body(self, lines: Sequence[str], first: int = 1) -> list[str]:
        """The region's lines between its markers (to the last line when it is unclosed)."""
        stop = self.end if self.closed else self.end + 1
        return list(lines[self.begin + 1 - first : stop - first])


@dataclass(frozen=True)
class MarkerProblem:
    """A marker that does not pair up, at line number `line`."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class RegionError(UsageError):
    """Markers that do not pair up; `problems` all of them in scan order, `line` the first's."""

    def __init__(self, problems: Sequence[MarkerProblem]):
        self.problems = list(problems)
        self.line = self.problems[0].line
        super().__init__("; ".join(str(p) for p in self.problems))


def _marker(line: str) -> tuple[str, str] | None:
    """("BEGIN" or "END", kind) for a marker line of a region kind, else None."""
    for kind in KINDS:
        if f"BEGIN {kind}" in line:
            return "BEGIN", kind
        if f"END {kind}" in line:
            return "END", kind
    return None


def scan(lines: Sequence[str], first: int = 1) -> tuple[list[Region], list[MarkerProblem]]:
    """Every region of one cell's `lines` and every marker problem (an unclosed BEGIN last)."""
    found: list[Region] = []
    problems: list[MarkerProblem] = []
    opened: tuple[str, int] | None = None  # (kind, line of its BEGIN)
    last = first
    for n, line in enumerate(lines, start=first):
        last = n
        marker = _marker(line)
        if marker is None:
            continue
        edge, kind = marker
        if edge == "BEGIN":
            if opened is not None:
                problems.append(
                    MarkerProblem(
                        n,
                        f"nested '### BEGIN {kind}' inside the 'BEGIN {opened[0]}' "
                        f"region opened at line {opened[1]}",
                    )
                )
            else:
                opened = (kind, n)
        elif opened is None:
            problems.append(
                MarkerProblem(n, f"unmatched '### END {kind}' (no BEGIN before it in this cell)")
            )
        else:
            if opened[0] != kind:
                problems.append(
                    MarkerProblem(
                        n,
                        f"'### END {kind}' closes the 'BEGIN {opened[0]}' region opened at "
                        f"line {opened[1]}",
                    )
                )
            found.append(Region(opened[0], opened[1], n))
            opened = None
    if opened is not None:
        problems.append(
            MarkerProblem(
                opened[1],
                f"unmatched '### BEGIN {opened[0]}': no END before the cell ends (line {last})",
            )
        )
        found.append(Region(opened[0], opened[1], last, closed=False))
    return found, problems


def regions(lines: Sequence[str], first: int = 1) -> list[Region]:
    """The regions of well-formed `lines`; RegionError naming the line of a stray marker."""
    found, problems = scan(lines, first)
    if problems:
        raise RegionError(problems)
    return found
