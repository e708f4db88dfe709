"""The one points format: how scores are rounded where they are stored and where they are shown.

One fraction, `12.5 / 40`, wherever a score is shown beside its maximum: the PR comment, the
HTML page, the terminal tables and the class report.

Two precisions, each for a reason. Stored values (result.json, gradebook.db) keep 6 decimals:
enough to drop float noise such as 35.999999999999986, while a test's points split over three
parametrized cases (1.333333 each) still add up to its points within 1e-6. Shown values (terminal
tables, reports, grades.csv, the class report) have at most 2 decimals and no trailing zeros.
"""

from __future__ import annotations

import math

STORED_DECIMALS = 6
SHOWN_DECIMALS = 2


def stored(x: float) -> float:
    """A score as it is written to a file a program reads back."""
    value = round(float(x), STORED_DECIMALS)
    return value + 0.0  # no -0.0


def rounded(x: float) -> float:
    """A score as people see it, as a number (grades.csv)."""
    return round(float(x), SHOWN_DECIMALS) + 0.0


def shown(x: float) -> str:
    """`36`, `12.5`, `1.33`: a score as people read it."""
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    r = rounded(x)
    if r == int(r):
        return str(int(r))
    return f"{r:.{SHOWN_DECIMALS}f}".rstrip("0").rstrip(".")


def fraction(score: float, max_score: float) -> str:
    """`12.5 / 40`: a score out of its maximum."""
    return f"{shown(score)} / {shown(max_score)}"
