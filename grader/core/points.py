"""The one points policy: points are whole eighths, so every sum is exact wherever it is done.

Why eighths: a score is added up in many places that we do not control: nbgrader sums its
gradebook rows in SQL (floats), a spreadsheet sums grades.csv, a reader sums a report's lines.
Decimal cents are not exact in binary floating point (0.1 + 0.2 != 0.3), so those sums drifted
(`52.999996999999986`). An eighth is exact in binary, so any float sum of a few thousand of them
is exact, and every eighth has a short decimal form (0.125). Hence the identities that every
output must keep, checked by the tests over the demo class:

- a test's parametrized cases add up to its points (`split`: whole eighths, largest first;
  `uneven` is the warning when they cannot weigh the same);
- an assignment's raw score is the sum of its tests' scores;
- score = raw score - late penalty, the score rounded to the nearest eighth (`after_penalty`);
- the total is the sum of the assignments' scores.

Shown values (`shown`, `fraction`: `12.5 / 40`, `41.125`) are the exact stored value, never
rounded again, so what a person adds up on a page agrees with the total on the same page.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction

PER_POINT = 8  # the unit is 1/PER_POINT of a point


def units(x: float | Fraction) -> int:
    """`x` points as whole units (eighths), the nearest one, halves rounded up."""
    value = Fraction(x) * PER_POINT
    return math.floor(value + Fraction(1, 2))


def from_units(n: int) -> float:
    """Whole units back to points; exact, since an eighth is a binary fraction."""
    return n / PER_POINT + 0.0  # no -0.0


def stored(x: float) -> float:
    """`x` on the points grid: the value every file and report holds."""
    if not math.isfinite(float(x)):
        raise ValueError(f"a score must be a finite number, got {x!r}")
    return from_units(units(x))


def total(values: Iterable[float]) -> float:
    """The exact sum of scores already on the grid (a list of parametrized cases, of tests...)."""
    return from_units(sum(units(v) for v in values))


def split(points: float, n: int) -> list[float]:
    """`points` shared by `n` parametrized cases, in whole units that add up to `points` exactly:
    the first cases carry the remainder (3 cases of 1 point: 0.375, 0.375, 0.25).

    Raises ValueError when a case would be worth nothing (more cases than units): the suite's
    author must give the test more points or fewer cases."""
    if n < 1:
        raise ValueError(f"cannot split {points} points over {n} cases")
    whole = units(points)
    if whole < n and whole > 0:
        raise ValueError(
            f"{n} cases cannot share {shown(points)} points: each case must be worth at least "
            f"1/{PER_POINT} point (give the test at least {shown(from_units(n))} points)"
        )
    base, extra = divmod(whole, n)
    return [from_units(base + (1 if k < extra else 0)) for k in range(n)]


def uneven(test: str, shares: Sequence[float]) -> str | None:
    """The warning for a test whose parametrized cases `split` could not share evenly (1 point
    over 6 cases: 0.25, 0.25, 0.125 x 4, so two cases weigh double), naming the test, the
    weights and the nearest totals that split evenly; None when every case weighs the same.
    `grader verify` says it (the suite's author decides: more points, fewer cases, or as is)."""
    if len(set(shares)) < 2:
        return None
    n, whole = len(shares), sum(units(x) for x in shares)
    heavy = sum(1 for x in shares if x == max(shares))
    lower, upper = (whole // n) * n, -(-whole // n) * n
    even = [shown(from_units(u)) for u in dict.fromkeys((lower, upper)) if u > 0]
    return (
        f"{test}: {shown(from_units(whole))} point{'' if whole == PER_POINT else 's'} over "
        f"{n} cases in whole eighths: the first "
        f"{heavy} weigh {shown(max(shares))}, the other {n - heavy} {shown(min(shares))} each; "
        f"{' or '.join(even)} points would split evenly"
    )


def after_penalty(raw: float, fraction: float) -> tuple[float, float]:
    """(score, penalty points) for a raw score with `fraction` (0..1) of it taken off.

    The score is rounded to the nearest unit and the penalty is what was taken, so
    score + penalty == raw holds exactly."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"a late penalty is a fraction in 0..1, got {fraction!r}")
    raw_units = units(raw)
    keep = Fraction(fraction).limit_denominator(10**6)
    score_units = units(Fraction(raw_units, PER_POINT) * (1 - keep))
    return from_units(score_units), from_units(raw_units - score_units)


def shown(x: float) -> str:
    """`36`, `12.5`, `1.375`: the stored value in its shortest exact decimal form."""
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    value = stored(x)
    if value == int(value):
        return str(int(value))
    return f"{value:.3f}".rstrip("0").rstrip(".")


def fraction(score: float, max_score: float) -> str:
    """`12.5 / 40`: a score out of its maximum."""
    return f"{shown(score)} / {shown(max_score)}"
