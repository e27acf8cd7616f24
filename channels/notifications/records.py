"""`notifications` rows: what a run says about its progress and its result.

One row per `(run_id, attempt_id, notification_index)`, the plan's deterministic key: the same
index with the same text adopts the row, another text under it is a conflict. The text is a
`text/plain` blob. Every function runs inside the caller's transaction.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum

import apsw

from state import blobs

__all__ = [
    "NO_SESSION", "Notification", "NotificationType", "for_run", "for_session", "get",
    "insert", "next_index", "notification_id_for",
]


class NotificationType(StrEnum):
    """A notification's kind (`notifications.notification_type`)."""

    PROGRESS = "progress"
    FINAL = "final"


NO_SESSION = ""  # the target of a notification that goes to no Pi session

_COLUMNS = ("notification_id, effect_id, run_id, attempt_id, notification_index,"
            " target_session_id, notification_type, content_hash, created_at")


@dataclass(frozen=True, slots=True)
class Notification:
    """One stored notification (its text read from its blob)."""

    notification_id: str
    effect_id: str
    run_id: str
    attempt_id: str
    notification_index: int
    target_session_id: str
    notification_type: str
    content_hash: bytes
    created_at: int
    text: str

    @property
    def is_final(self) -> bool:
        return self.notification_type == "final"


def notification_id_for(run_id: str, attempt_id: str, index: int) -> str:
    """The deterministic id of a notification: the same key always names the same row."""
    basis = f"{run_id}\0{attempt_id}\0{index}".encode()
    return "notification-" + hashlib.sha256(basis).hexdigest()[:40]


def insert(conn: apsw.Connection, n: Notification) -> None:
    """Record a new notification (its blob and its effect are already written)."""
    conn.execute(
        f"INSERT INTO notifications ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (n.notification_id, n.effect_id, n.run_id, n.attempt_id, n.notification_index,
         n.target_session_id, n.notification_type, n.content_hash, n.created_at))


def _load(conn: apsw.Connection, rows: list[tuple[object, ...]]) -> list[Notification]:
    found = []
    for row in rows:
        values = list(row)
        content = bytes(values[7])  # type: ignore[call-overload]
        found.append(Notification(
            str(values[0]), str(values[1]), str(values[2]), str(values[3]),
            int(values[4]), str(values[5]), str(values[6]),  # type: ignore[call-overload]
            content, int(values[8]), blobs.get_text(conn, content)))  # type: ignore[call-overload]
    return found


def get(conn: apsw.Connection, notification_id: str) -> Notification | None:
    """One notification, or None."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM notifications WHERE notification_id = ?",
                        (notification_id,)).fetchall()
    found = _load(conn, rows)
    return found[0] if found else None


def next_index(conn: apsw.Connection, run_id: str, attempt_id: str) -> int:
    """The index after the attempt's highest one (0 for its first notification)."""
    value = conn.execute(
        "SELECT max(notification_index) FROM notifications WHERE run_id = ? AND attempt_id = ?",
        (run_id, attempt_id)).get
    return 0 if value is None else int(value) + 1


def for_run(conn: apsw.Connection, run_id: str) -> list[Notification]:
    """A run's notifications in the order they were made."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM notifications WHERE run_id = ?"
        " ORDER BY created_at, notification_index", (run_id,)).fetchall()
    return _load(conn, rows)


def for_session(conn: apsw.Connection, session_id: str, statuses: tuple[str, ...],
                now: int | None = None) -> list[Notification]:
    """The notifications targeted at one Pi session whose own effect (`pi.notify`) is in one
    of `statuses`, oldest first; with `now`, only those due by then."""
    marks = ", ".join("?" for _ in statuses)
    due = "" if now is None else " AND (e.next_attempt_at IS NULL OR e.next_attempt_at <= ?)"
    rows = conn.execute(
        f"SELECT {', '.join('n.' + c.strip() for c in _COLUMNS.split(','))}"
        " FROM notifications n JOIN effects e ON e.effect_id = n.effect_id"
        f" WHERE n.target_session_id = ? AND e.status IN ({marks}){due}"
        " ORDER BY n.created_at, n.notification_index",
        (session_id, *statuses, *(() if now is None else (now,)))).fetchall()
    return _load(conn, rows)


def _runs_with_notifications(conn: apsw.Connection, limit: int) -> list[str]:
    """The runs that made notifications, newest first (for `status`)."""
    rows = conn.execute(
        "SELECT run_id FROM notifications GROUP BY run_id ORDER BY max(created_at) DESC"
        " LIMIT ?", (limit,))
    return [str(r[0]) for r in rows]
