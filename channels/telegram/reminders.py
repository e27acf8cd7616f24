"""When a waiting decision is brought back to the top of the chat, and what the reminder says.

Before a deadline (windows of an hour or more): at half the window and 10 minutes before.
Without a deadline: "Still waiting" after an hour, then once a day. A reminder that falls in an
audience's quiet hours waits for their end, unless the deadline passes first. Pure functions;
one reminder is outstanding at a time (each one, once sent, schedules the next).
"""

from __future__ import annotations

from channels.config.quiet_hours import QuietHours
from channels.decisions import records
from channels.decisions.deadline import clock_time
from channels.telegram.time_left import DAY_MS, HOUR_MS, MINUTE_MS, remaining

__all__ = ["EARLIEST_MS", "default_label", "next_reminder", "reminder_text", "schedule"]


_MIN_WINDOW_MS = HOUR_MS
_BEFORE_DEADLINE_MS = 10 * MINUTE_MS
_FIRST_STILL_WAITING_MS = HOUR_MS
_MAX_REMINDERS = 400  # a decision without a deadline: about a year of daily reminders
# No reminder is ever due sooner after the ask: half the shortest window that has any.
EARLIEST_MS = min(_MIN_WINDOW_MS // 2, _FIRST_STILL_WAITING_MS)

def schedule(created_ms: int, deadline_ms: int | None) -> list[int]:
    """Every reminder time of a decision, before quiet hours move them."""
    if deadline_ms is None:
        first = created_ms + _FIRST_STILL_WAITING_MS
        return [first + n * DAY_MS for n in range(_MAX_REMINDERS)]
    window = deadline_ms - created_ms
    if window < _MIN_WINDOW_MS:
        return []
    return [created_ms + window // 2, deadline_ms - _BEFORE_DEADLINE_MS]


def next_reminder(created_ms: int, deadline_ms: int | None, after_ms: int,
                  quiet: QuietHours | None = None) -> int | None:
    """The first reminder due after `after_ms` (moved past quiet hours), or None."""
    for at in schedule(created_ms, deadline_ms):
        if at <= after_ms:
            continue
        end = quiet.end_after(at) if quiet is not None else None
        moved = at if end is None else end
        if deadline_ms is not None and moved >= deadline_ms - MINUTE_MS:
            continue  # after the quiet hours it would be too late to be of use
        return max(moved, after_ms + 1)
    return None


def default_label(decision: records.StoredDecision) -> str | None:
    default = decision.request.default_response
    if default is None:
        return None
    chosen = decision.request.choices.get(str(default["choice"]))
    return str(chosen["label"]) if chosen is not None else str(default["choice"])


def reminder_text(title: str, fp: str, created_ms: int, deadline_ms: int | None,
                  default_label: str | None, now_ms: int) -> str:
    """The reminder, a short reply to the card."""
    from channels.telegram.outcomes import shorten  # not loaded by a pass that reminds nobody

    if deadline_ms is None:
        asked = remaining(now_ms - created_ms).removeprefix("in ")
        first = f"Still waiting for an answer (asked {asked} ago)"
    else:
        then = f"then: {default_label}" if default_label is not None else "then it expires"
        first = (f"Reminder: answer by {clock_time(deadline_ms, now_ms)}, "
                 f"{remaining(deadline_ms - now_ms)}; {then}")
    return f"{first}\n{shorten(title.strip(), 200)}\nDecision {fp}"
