"""Plain-text tables for the terminal (the CLI's only output format besides files)."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return _short(value)
    return str(value)


def points(score: float, max_score: float) -> str:
    """`12.5/40`: at most two decimals (parametrized tests split points into fractions)."""
    return f"{_short(score)}/{_short(max_score)}"


def _short(x: float) -> str:
    return f"{round(float(x), 2):g}"
