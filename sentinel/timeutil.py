"""Times given on the command line and in config: ISO-8601 or relative (``24h``, ``7d``).

Everything inside Sentinel is naive UTC (``event_time`` columns are UTC ``TIMESTAMP``), so parsed
times are converted to UTC and stripped of their zone.
"""

from __future__ import annotations

import datetime as dt
import re

from sentinel.errors import UsageError

_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def utcnow() -> dt.datetime:
    """The current time as naive UTC, to the microsecond."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def parse_duration(text: str) -> dt.timedelta:
    """``90s``, ``15m``, ``6h``, ``7d``, ``2w`` as a timedelta."""
    match = _RELATIVE.match(text)
    if not match:
        raise UsageError(f"invalid duration {text!r}", hint="use e.g. 30m, 6h, 7d or 2w")
    return dt.timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2).lower()])


def parse_time(text: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """An absolute UTC time from ISO-8601 (date, or date and time with optional zone, ``Z``
    allowed) or a relative form meaning "that long before now" (``24h``, ``7d``)."""
    value = text.strip()
    if _RELATIVE.match(value):
        return (now or utcnow()) - parse_duration(value)
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"invalid time {text!r}",
            hint="use ISO-8601 (2026-05-01, 2026-05-01T10:00:00Z) or relative (24h, 7d)",
        ) from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(dt.UTC).replace(tzinfo=None)
    return parsed


def floor_to(moment: dt.datetime, step: dt.timedelta) -> dt.datetime:
    """The start of the fixed UTC window of length ``step`` (epoch-aligned) holding ``moment``."""
    seconds = int(step.total_seconds())
    epoch = dt.datetime(1970, 1, 1)
    offset = int((moment - epoch).total_seconds()) // seconds * seconds
    return epoch + dt.timedelta(seconds=offset)
