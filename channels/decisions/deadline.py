"""A decision's deadline in words that stay true when read later (a Pi transcript entry), and
the clock time every channel shows: "Answer by Wed 2 Dec 16:22 UTC; then: Stop".

Times are shown in UTC with the day when it is not today's. Pure functions. The countdown a
card shows ("in 15 min") is the Telegram channel's (`channels.telegram.time_left`).
"""

from __future__ import annotations

import time

from channels.decisions.dates import ms_from_iso

__all__ = ["clock_time", "dated_deadline_line"]


def dated_deadline_line(expires_at: str | None, default_label: str | None) -> str:
    """The deadline line of a text that stays (a Pi transcript entry): always dated, with no
    "in 15 min" that would be wrong when read later."""
    if expires_at is None:
        return "No deadline"
    at = ms_from_iso(expires_at)
    then = f"then: {default_label}" if default_label is not None else "then it expires"
    return f"Answer by {clock_time(at)}; {then}"


def clock_time(at_ms: int, now_ms: int | None = None) -> str:
    """`16:22 UTC`, or `Wed 2 Dec 16:22 UTC` when it is not on today's date (always dated
    without a `now_ms`)."""
    moment = time.gmtime(at_ms // 1000)
    clock = time.strftime("%H:%M UTC", moment)
    if now_ms is not None and moment[:3] == time.gmtime(now_ms // 1000)[:3]:
        return clock
    day = time.strftime("%a %d %b", moment).replace(" 0", " ")
    return f"{day} {clock}"
