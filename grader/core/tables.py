"""Plain-text tables for the terminal (the CLI's only output format besides files).

Numbers in a table are shown in the one points format (grader.core.points); `points` and `score`
are that format's two functions under the names the CLI and the batch use for table cells.
"""

from __future__ import annotations

from collections.abc import Sequence

from grader.core.points import fraction as points
from grader.core.points import shown as score

__all__ = ["format_table", "points", "score"]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell, a dashed rule under the headers."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return score(value)
    return str(value)
