"""The late policy: a fraction of an assignment's score taken off for a late submission.

The submission time must come from trusted CI (the grading workflow's `--timestamp`, i.e. the time
the pull request was received), never from a commit date: a student sets those freely.

Lateness is measured from the due date. Submissions up to `grace_minutes` after it cost nothing;
past the grace window every *started* day of lateness (counted from the due date, so the grace
window is forgiveness, not a shift of the deadline) costs `penalty_per_day`, capped at
`max_penalty`. With a 15-minute grace: 15 min late -> 0, 16 min late -> 1 day, 24 h late -> 1 day,
24 h 1 min late -> 2 days.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from grader.core.course import LatePolicy
from grader.core.errors import UsageError

DAY = timedelta(days=1)


class TimestampError(UsageError):
    """A submission time that is not an ISO 8601 date-time with a time zone."""


def parse_timestamp(text: str) -> datetime:
    """Parse a trusted ISO 8601 time with `Z` or a UTC offset; naive times are rejected.

    `2026-12-14T23:59:00Z`, `2026-12-14T23:59:00+02:00` and `2026-12-14 23:59:00.5+00:00` parse;
    `2026-12-14T23:59:00` raises: without a zone it could be off by hours.
    """
    if not isinstance(text, str):
        raise TimestampError(f"timestamp must be a string, got {type(text).__name__}")
    raw = text.strip()
    if not raw:
        raise TimestampError("timestamp is empty; expected ISO 8601, e.g. 2026-12-14T23:59:00Z")
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise TimestampError(
            f"timestamp {text!r} is not ISO 8601; expected e.g. 2026-12-14T23:59:00Z"
        ) from exc
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise TimestampError(
            f"timestamp {text!r} has no time zone; add Z or an offset such as +00:00 "
            "(a naive time would be read differently on every machine)"
        )
    return parsed


def late_penalty(due: datetime, submitted: datetime | None, policy: LatePolicy) -> float:
    """Fraction (0..policy.max_penalty) of the score taken off; None (no timestamp) -> 0."""
    if submitted is None:
        return 0.0
    for name, value in (("due", due), ("submitted", submitted)):
        if value.tzinfo is None or value.utcoffset() is None:
            raise TimestampError(f"{name} time {value.isoformat()} has no time zone")
    late = submitted - due
    if late <= timedelta(minutes=policy.grace_minutes):
        return 0.0
    days = math.ceil(late / DAY)
    penalty = min(policy.max_penalty, days * policy.penalty_per_day)
    # 3 * 0.1 is 0.30000000000000004: round away the float noise, keep the fraction exact-looking
    return round(max(0.0, penalty), 12)
