"""Plain-text tables for the terminal (the CLI's only output format besides files)."""

from __future__ import annotations

from collections.abc import Sequence

from grader.core.points import fraction, shown


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return shown(value)
    return str(value)


def points(score: float, max_score: float) -> str:
    """`12.5/40` (grader.core.points: parametrized tests split points into fractions)."""
    return fraction(score, max_score)


def score(x: float) -> str:
    """`12.5`: one score in the points format."""
    return shown(x)
