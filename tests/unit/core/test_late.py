from datetime import UTC, datetime, timedelta, timezone

import pytest

from grader.core.course import LatePolicy
from grader.core.late import TimestampError, late_penalty, parse_timestamp

POLICY = LatePolicy(grace_minutes=15, penalty_per_day=0.1, max_penalty=0.5)
DUE = datetime(2026, 12, 14, 23, 59, tzinfo=UTC)


@pytest.mark.parametrize(
    ("late", "expected"),
    [
        (timedelta(days=-3), 0.0),  # early
        (timedelta(0), 0.0),  # on time
        (timedelta(minutes=15), 0.0),  # last moment of the grace window
        (timedelta(minutes=16), 0.1),  # 1 minute after grace: one started day
        (timedelta(hours=24), 0.1),  # exactly one day late
        (timedelta(hours=24, minutes=1), 0.2),  # second day started
        (timedelta(days=2, seconds=1), 0.3),
        (timedelta(days=5), 0.5),  # at the cap
        (timedelta(days=40), 0.5),  # capped
    ],
)
def test_penalty_boundaries(late, expected):
    assert late_penalty(DUE, DUE + late, POLICY) == pytest.approx(expected, abs=1e-12)


def test_penalty_is_exact_fraction_without_float_noise():
    assert late_penalty(DUE, DUE + timedelta(days=2, hours=1), POLICY) == 0.3


def test_no_timestamp_no_penalty():
    assert late_penalty(DUE, None, POLICY) == 0.0


def test_offsets_compare_as_instants():
    # 00:10 at +01:00 is 23:10 UTC: before the deadline
    submitted = datetime(2026, 12, 15, 0, 10, tzinfo=timezone(timedelta(hours=1)))
    assert late_penalty(DUE, submitted, POLICY) == 0.0


def test_naive_times_are_refused():
    with pytest.raises(TimestampError, match="time zone"):
        late_penalty(DUE, datetime(2026, 12, 20), POLICY)


@pytest.mark.parametrize(
    ("text", "utc"),
    [
        ("2026-12-14T23:59:00Z", datetime(2026, 12, 14, 23, 59, tzinfo=UTC)),
        ("2026-12-15T01:59:00+02:00", datetime(2026, 12, 14, 23, 59, tzinfo=UTC)),
        (" 2026-12-14 23:59:00.250+00:00 ", datetime(2026, 12, 14, 23, 59, 0, 250000, tzinfo=UTC)),
    ],
)
def test_parse_timestamp(text, utc):
    parsed = parse_timestamp(text)
    assert parsed.tzinfo is not None
    assert parsed == utc


@pytest.mark.parametrize(
    "text", ["2026-12-14T23:59:00", "2026-12-14", "", "yesterday", "12/14/2026"]
)
def test_parse_timestamp_rejects(text):
    with pytest.raises(TimestampError) as info:
        parse_timestamp(text)
    assert "ISO 8601" in str(info.value) or "time zone" in str(info.value)


def test_parse_timestamp_is_a_value_error():
    with pytest.raises(ValueError, match="no time zone"):
        parse_timestamp("2026-12-14T23:59:00")
