"""How long a decision has left, as a card and a reminder say it: "Answer by 16:22 UTC, in
15 min; then: Stop". Pure functions; the clock time itself is the decisions' own
(`channels.decisions.deadline.clock_time`), shared with the Pi transcript's dated line.
"""

from __future__ import annotations

from channels.decisions.dates import ms_from_iso
from channels.decisions.deadline import clock_time

__all__ = ["DAY_MS", "HOUR_MS", "MINUTE_MS", "deadline_line", "remaining"]


MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS


def deadline_line(expires_at: str | None, default_label: str | None, now_ms: int) -> str:
    """The card's deadline line."""
    if expires_at is None:
        return "No deadline"
    at = ms_from_iso(expires_at)
    then = f"then: {default_label}" if default_label is not None else "then it expires"
    when = clock_time(at, now_ms)
    if at <= now_ms:
        return f"The deadline passed at {when}; {then}"
    return f"Answer by {when}, {remaining(at - now_ms)}; {then}"


def remaining(ms: int) -> str:
    """`in 15 min`, `in 2 h 5 min`, `in 3 days`; never `in 0 min`. Minutes are rounded: a
    card sent a moment after a 15-minute decision was asked says 15, not 14."""
    if ms < MINUTE_MS:
        return "in under a minute"
    if ms < HOUR_MS - MINUTE_MS // 2:
        return f"in {(ms + MINUTE_MS // 2) // MINUTE_MS} min"
    if ms < DAY_MS:
        hours, minutes = divmod((ms + MINUTE_MS // 2) // MINUTE_MS, 60)
        return f"in {hours} h" + (f" {minutes} min" if minutes else "")
    days, rest = divmod(ms, DAY_MS)
    hours = rest // HOUR_MS
    unit = "day" if days == 1 else "days"
    return f"in {days} {unit}" + (f" {hours} h" if hours and days < 3 else "")
