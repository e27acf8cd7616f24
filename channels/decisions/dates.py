"""ECMAScript-compatible ISO-8601 dates: what `Date.toISOString` writes and `Date.parse` reads.

Requests carry their times as text; digests depend on the exact text, so it is JavaScript's.
"""

from __future__ import annotations

import re

__all__ = ["iso_from_ms", "ms_from_iso"]


_MAX_DATE_MS = 8_640_000_000_000_000  # ECMAScript time value range

_MS_PER_DAY = 86_400_000

_ISO_RE = re.compile(
    r"(?P<year>[+-]\d{6}|\d{4})(?:-(?P<month>\d{2})(?:-(?P<day>\d{2})"
    r"(?:T(?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:\.(?P<fraction>\d+))?)?"
    r"(?P<zone>Z|[+-]\d{2}:\d{2}))?)?)?"
)


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 in the proleptic Gregorian calendar."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    days += 719_468
    era = days // 146_097
    day_of_era = days - era * 146_097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = shifted_month + (3 if shifted_month < 10 else -9)
    return year_of_era + era * 400 + (month <= 2), month, day


def iso_from_ms(ms: int) -> str:
    """JavaScript `new Date(ms).toISOString()`, e.g. `2026-08-19T00:00:00.000Z`."""
    if abs(ms) > _MAX_DATE_MS:
        raise ValueError(f"{ms} ms is outside the JavaScript date range")
    days, rest = divmod(ms, _MS_PER_DAY)
    year, month, day = _civil_from_days(days)
    seconds, millis = divmod(rest, 1000)
    clock = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{millis:03d}Z"
    shown_year = (
        f"{year:04d}" if 0 <= year <= 9999 else f"{'+' if year > 0 else '-'}{abs(year):06d}"
    )
    return f"{shown_year}-{month:02d}-{day:02d}T{clock}"


def ms_from_iso(text: str) -> int:
    """Epoch milliseconds of an ISO 8601 timestamp; a time of day needs `Z` or an offset."""
    match = _ISO_RE.fullmatch(text)
    if match is None or match["year"] == "-000000":
        raise ValueError(f"{text!r} is not an ISO timestamp")
    year, month, day = int(match["year"]), int(match["month"] or 1), int(match["day"] or 1)
    hour, minute = int(match["hour"] or 0), int(match["minute"] or 0)
    second = int(match["second"] or 0)
    millis = int((match["fraction"] or "0")[:3].ljust(3, "0"))
    if not _valid_date(year, month, day) or not _valid_clock(hour, minute, second, millis):
        raise ValueError(f"{text!r} is not a valid date")
    offset = _zone_minutes(match["zone"])
    clock_ms = ((hour * 60 + minute - offset) * 60 + second) * 1000 + millis
    ms = _days_from_civil(year, month, day) * _MS_PER_DAY + clock_ms
    if abs(ms) > _MAX_DATE_MS:
        raise ValueError(f"{text!r} is outside the JavaScript date range")
    return ms


def _valid_date(year: int, month: int, day: int) -> bool:
    if not 1 <= month <= 12:
        return False
    following = (year + 1, 1) if month == 12 else (year, month + 1)
    length = _days_from_civil(*following, 1) - _days_from_civil(year, month, 1)
    return 1 <= day <= length


def _valid_clock(hour: int, minute: int, second: int, millis: int) -> bool:
    if hour == 24:
        return minute == second == millis == 0
    return hour < 24 and minute < 60 and second < 60


def _zone_minutes(zone: str | None) -> int:
    if zone is None or zone == "Z":
        return 0
    hours, minutes = int(zone[1:3]), int(zone[4:6])
    if hours > 23 or minutes > 59:
        raise ValueError(f"{zone!r} is not a UTC offset")
    sign = -1 if zone[0] == "-" else 1
    return sign * (hours * 60 + minutes)
