from __future__ import annotations

import datetime as dt

import pytest

from sentinel.errors import UsageError
from sentinel.timeutil import floor_to, parse_duration, parse_time

NOW = dt.datetime(2026, 5, 4, 12, 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-05-01", dt.datetime(2026, 5, 1)),
        ("2026-05-01T10:00:00Z", dt.datetime(2026, 5, 1, 10)),
        ("2026-05-01T12:00:00+02:00", dt.datetime(2026, 5, 1, 10)),
        ("24h", dt.datetime(2026, 5, 3, 12)),
        ("7d", dt.datetime(2026, 4, 27, 12)),
        ("90m", dt.datetime(2026, 5, 4, 10, 30)),
    ],
)
def test_parse_time(text: str, expected: dt.datetime) -> None:
    assert parse_time(text, now=NOW) == expected


def test_bad_times_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="invalid time"):
        parse_time("yesterday")
    with pytest.raises(UsageError, match="invalid duration"):
        parse_duration("5 parsecs")


def test_floor_to_fixed_windows() -> None:
    assert floor_to(dt.datetime(2026, 5, 4, 10, 59), dt.timedelta(hours=1)) == dt.datetime(
        2026, 5, 4, 10
    )
    assert floor_to(dt.datetime(2026, 5, 4, 10, 59), dt.timedelta(days=1)) == dt.datetime(
        2026, 5, 4
    )
