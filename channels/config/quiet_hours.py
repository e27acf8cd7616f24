"""An audience's quiet hours: a daily UTC window in which no reminder is sent."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["QuietHours"]


_DAY_MS = 86_400_000
_MINUTE_MS = 60_000
_HOURS_RE = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


@dataclass(frozen=True, slots=True)
class QuietHours:
    """A daily UTC window ("22:00-07:00") in which no reminder is sent."""

    start_min: int
    end_min: int

    @classmethod
    def parse(cls, text: str) -> QuietHours:
        match = _HOURS_RE.fullmatch(text)
        if match is None:
            raise ValueError("must be HH:MM-HH:MM (UTC), for example 22:00-07:00")
        h1, m1, h2, m2 = (int(g) for g in match.groups())
        if (h1, m1) == (h2, m2):
            raise ValueError("must not start and end at the same time")
        return cls(h1 * 60 + m1, h2 * 60 + m2)

    def end_after(self, at_ms: int) -> int | None:
        """The end of the quiet window `at_ms` falls in, or None when it is outside it."""
        minute = (at_ms % _DAY_MS) // _MINUTE_MS
        inside = self.start_min <= minute < self.end_min if self.start_min < self.end_min \
            else minute >= self.start_min or minute < self.end_min
        if not inside:
            return None
        day = at_ms - at_ms % _DAY_MS
        end = day + self.end_min * _MINUTE_MS
        return end if end > at_ms else end + _DAY_MS
