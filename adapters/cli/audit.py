"""`piw-channels audit`: every approval since a time, one line each (or `--json`): who asked
(agent, host), what (the title, the request digest that binds the exact input), when, how it
ended (outcome, choice, provenance), who answered and through which channel.

`--since` takes an ISO date or date-time (UTC unless it names its offset) or a span back from
now (`90s`, `30m`, `2h`, `3d`, `2w`); anything else is refused with one line (exit 2).
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from adapters.cli.decision_table import cut, display_width, terminal_width
from adapters.cli.errors import UsageError
from adapters.cli.status_text import with_iso
from channels.reports import audit as approvals
from state.database import Database
from state.errors import DatabaseMissing
from state.exit_codes import ExitCode

__all__ = ["parse_since", "register", "render_audit"]


_SPAN: Final = re.compile(r"(\d{1,7})\s*(s|m|h|d|w)")
_SPAN_MS: Final = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000,
                   "w": 604_800_000}
_DEFAULT_SINCE: Final = "24h"
_NONE: Final = "—"
_GAP: Final = "  "
_COLUMNS: Final = ("ASKED", "AGENT", "HOST", "OUTCOME", "BY", "WHO", "VIA", "RESOLVED",
                   "DIGEST", "TITLE")
_CELL_MAX: Final = 24
_WHO_MAX: Final = 48  # a name with its Telegram user id
_DIGEST_HEX: Final = 12
_FORMS: Final = ("give an ISO date or time (2026-12-06, 2026-12-06T14:30, 2026-12-06T14:30Z,"
                 " 2026-12-06T14:30+02:00) or a span back from now (90s, 30m, 2h, 3d, 2w)")


def parse_since(text: str, now_ms: int) -> int:
    """`--since` as epoch milliseconds (UsageError on anything else)."""
    said = text.strip()
    span = _SPAN.fullmatch(said)
    if span is not None:
        return now_ms - int(span.group(1)) * _SPAN_MS[span.group(2)]
    try:
        at = datetime.fromisoformat(said.replace(" ", "T", 1)) if said else None
    except ValueError:
        at = None
    if at is None or not re.match(r"\d{4}-\d{2}-\d{2}", said):
        raise UsageError(f"--since {text!r}: {_FORMS}")
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)  # a time without an offset is UTC, as every time here
    return int((at - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(milliseconds=1))


def _when(ms: int | None) -> str:
    if ms is None:
        return _NONE
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _cells(row: approvals.AuditRow) -> dict[str, str]:
    outcome = row.choice_label or (f"cancelled: {row.reason}" if row.outcome == "cancelled"
                                   else row.outcome)
    who = row.who_name or row.who or _NONE
    if row.who_name and row.who and row.who_name != row.who:
        who = f"{row.who_name} ({row.who})"
    return {"ASKED": _when(row.asked_at), "AGENT": row.agent, "HOST": row.host,
            "OUTCOME": outcome, "BY": row.provenance or _NONE, "WHO": who,
            "VIA": row.channel or _NONE, "RESOLVED": _when(row.resolved_at),
            "DIGEST": row.request_digest.removeprefix("sha256:")[:_DIGEST_HEX],
            "TITLE": row.title}


def render_audit(rows: list[approvals.AuditRow], width: int | None) -> list[str]:
    """The header and one line per decision (the title cut to fit `width`, when given)."""
    table = [dict(zip(_COLUMNS, _COLUMNS, strict=True))] + [_cells(r) for r in rows]
    table = [{k: " ".join(v.split()) if k == "TITLE" else
              cut(" ".join(v.split()), _WHO_MAX if k == "WHO" else _CELL_MAX)
              for k, v in r.items()} for r in table]
    widths = {c: max(display_width(r[c]) for r in table) for c in _COLUMNS}
    lines = []
    for r in table:
        line = _GAP.join(r[c] + " " * (widths[c] - display_width(r[c])) for c in _COLUMNS[:-1])
        line += _GAP + r["TITLE"]
        lines.append(line.rstrip() if width is None else cut(line, width).rstrip())
    return lines


def _cmd_audit(args: argparse.Namespace) -> int:
    try:
        db = Database.open_reader()
    except DatabaseMissing:
        parse_since(args.since, 0)  # bad input is refused even before there is a database
        print("[]" if args.json else "no decisions (no database yet)")
        return ExitCode.OK
    with db:
        since = parse_since(args.since, db.clock.now_ms())
        rows = db.read(lambda c: approvals.audit(c, since))
    if args.json:
        document: list[dict[str, Any]] = [with_iso(r.to_json()) for r in rows]
        print(json.dumps(document, indent=2, ensure_ascii=False))
        return ExitCode.OK
    if not rows:
        print(f"no decisions since {_when(since)}")
        return ExitCode.OK
    for line in render_audit(rows, terminal_width()):
        print(line)
    return ExitCode.OK


def register(sub: Any) -> None:
    p = sub.add_parser("audit", help="every approval since a time: who asked, who answered,"
                       " how, when, through which channel, and the request digest")
    p.add_argument("--since", default=_DEFAULT_SINCE, metavar="TIME",
                   help="an ISO date or time (UTC unless it says its offset), or a span back"
                   " from now: 90s, 30m, 2h, 3d, 2w (default: 24h)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_audit)
