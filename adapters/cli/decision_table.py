"""The `decisions` table for a person: one row per decision that fits the terminal.

Pure functions of the listed decisions, `now` and the width. On a narrow terminal the
columns a person needs least go first (empty ones, then the full id: the fingerprint names a
decision as well, ...), then the title is cut with "…"; no row is wider than the terminal. Without a
terminal (a pipe) every column is kept and only long titles are cut, so no row is ever
thousands of columns wide either.
"""

from __future__ import annotations

import os
import shutil
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from adapters.cli.alerts import duration
from channels.decisions import history, views
from channels.decisions.askers import Asker

__all__ = ["BY", "Listed", "cut", "display_width", "render_table", "status_text", "terminal_width"]


_NONE: Final = "—"
_GAP: Final = "  "
_CELL_MAX: Final = 24  # a cancel reason or a long label is cut here
_CAPPED: Final = frozenset({"AGENT", "HOST", "AUDIENCE", "OUTCOME", "VIA"})
_TITLE_MAX_PIPED: Final = 100  # the title's cut when the output is not a terminal
_TITLE_MIN: Final = 12  # below this, a column is dropped instead of cutting the title further
_COLUMNS: Final = ("ID", "FINGERPRINT", "AGE", "AGENT", "HOST", "AUDIENCE", "STATUS", "OUTCOME",
                   "VIA", "WHEN", "DEADLINE", "TITLE")
# Dropped in this order while the row does not fit.
_DROP_ORDER: Final = ("ID", "AUDIENCE", "WHEN", "HOST", "VIA", "AGE", "AGENT", "OUTCOME",
                      "DEADLINE")

_NO_ASKER: Final = Asker()  # a workflow, its host unknown

# What decided a decision no person answered.
BY: Final = {"timeout_policy": "timeout default", "explicit_cancel": "cancel command",
       "expired_no_default": "deadline"}


@dataclass(frozen=True, slots=True)
class Listed:
    """One decision as `decisions` lists it."""

    view: views.DecisionView
    fingerprint: str
    winner: history.Winner | None
    asker: Asker = _NO_ASKER  # the agent and host that asked


def terminal_width() -> int | None:
    """The width to fit: `COLUMNS`, else the terminal's; None when printing to a pipe."""
    if os.environ.get("COLUMNS", "").strip().isdigit() or sys.stdout.isatty():
        return max(shutil.get_terminal_size().columns, 20)
    return None


def _deadline_text(deadline_at: int | None, now: int, *, relative: bool) -> str:
    """`16:22 UTC (in 15 min)`, another day's with its date, or "—" without a deadline."""
    if deadline_at is None:
        return _NONE
    at = datetime.fromtimestamp(deadline_at / 1000, UTC)
    same_day = at.date() == datetime.fromtimestamp(now / 1000, UTC).date()
    text = at.strftime("%H:%M UTC") if same_day else \
        f"{at.strftime('%b')} {at.day} {at.strftime('%H:%M UTC')}"
    if at.year != datetime.fromtimestamp(now / 1000, UTC).year:
        text = f"{at.year} {text}"
    if not relative:
        return text
    left = deadline_at - now
    return f"{text} (in {_about(left)})" if left > 0 else f"{text} ({_about(-left)} ago)"


def _about(ms: int) -> str:
    """A span in one unit: 45 s, 12 min, 47 h, 3 days."""
    seconds = ms // 1000
    for unit, size, below in (("s", 1, 120), ("min", 60, 120), ("h", 3600, 48)):
        if seconds < size * below:
            return f"{seconds // size} {unit}"
    return f"{seconds // 86400} days"


def status_text(view: views.DecisionView, now: int) -> str:
    """The status word; an open decision past its deadline is "overdue" (poll or `expire`
    applies the deadline next)."""
    if view.status == "open" and view.deadline_at is not None and view.deadline_at <= now:
        return "overdue"
    return view.display_status


def _row(item: Listed, now: int) -> dict[str, str]:
    """The cells of one decision, by column name."""
    v, w = item.view, item.winner
    is_open = v.status == "open"
    return {
        "ID": v.decision_id[:17], "FINGERPRINT": item.fingerprint,
        "AGE": duration(now - v.created_at), "AGENT": item.asker.agent,
        "HOST": item.asker.host, "AUDIENCE": v.audience,
        "STATUS": status_text(v, now), "OUTCOME": v.choice_label or v.reason or _NONE,
        "VIA": _NONE if w is None else (w.channel or BY.get(w.provenance, w.provenance)),
        "WHEN": _NONE if v.resolved_at is None else f"{duration(now - v.resolved_at)} ago",
        "DEADLINE": _deadline_text(v.deadline_at, now, relative=is_open),
        "TITLE": v.title,
    }


def render_table(listed: Sequence[Listed], now: int, width: int | None) -> list[str]:
    """The header and one line per decision, each at most `width` columns wide."""
    rows = [dict(zip(_COLUMNS, _COLUMNS, strict=True))] + [_row(i, now) for i in listed]
    rows = [{k: cut(_one_line(v), _CELL_MAX) if k in _CAPPED else _one_line(v)
             for k, v in r.items()} for r in rows]
    columns = list(_COLUMNS)
    widths = {c: max(display_width(r[c]) for r in rows) for c in columns}

    def fixed() -> int:
        return sum(widths[c] + len(_GAP) for c in columns if c != "TITLE")

    if width is None:
        title_width = _TITLE_MAX_PIPED
    else:
        # Columns with nothing in them go first (an open decision has no outcome yet).
        empty = [c for c in _DROP_ORDER if all(r[c] == _NONE for r in rows[1:])]
        for name in dict.fromkeys(empty + list(_DROP_ORDER)):
            if width - fixed() >= min(_TITLE_MIN, widths["TITLE"]):
                break
            columns.remove(name)
        title_width = width - fixed()
    lines = []
    for r in rows:
        cells = [_pad(r[c], widths[c]) for c in columns if c != "TITLE"]
        line = _GAP.join(cells) + _GAP + cut(r["TITLE"], max(title_width, 1))
        lines.append(line.rstrip() if width is None else cut(line, width).rstrip())
    return lines


def _one_line(text: str) -> str:
    """Line breaks, tabs and other control characters become spaces."""
    return "".join(" " if unicodedata.category(ch)[0] == "C" else ch for ch in text)


def _char_width(ch: str) -> int:
    """Columns a character takes on a terminal: wide East Asian and emoji 2, marks 0."""
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def display_width(text: str) -> int:
    """Columns a text takes on a terminal."""
    return sum(_char_width(ch) for ch in text)


def cut(text: str, width: int) -> str:
    """The text, cut with "…" so that it takes at most `width` columns."""
    if display_width(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        if used + _char_width(ch) > width - 1:
            break
        out.append(ch)
        used += _char_width(ch)
    return "".join(out).rstrip().rstrip("…") + "…"


def _pad(text: str, width: int) -> str:
    """Left-aligned in `width` columns."""
    return text + " " * (width - display_width(text))
