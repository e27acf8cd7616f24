"""`channel_inbox`: the durable, deduplicated log of inbound provider events.

Every row is processed exactly once: its result is written in the same transaction as its
consequences.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import apsw

from channels.store import advance_numeric_cursor, channel_resource, verify
from state import blobs, resources
from state.errors import WriteRejected
from state.leases import Lease

__all__ = [
    "EventType", "InboundEvent", "InboxRow", "get_inbox", "inbox_counts", "inbox_result",
    "ingest", "unprocessed",
]


class EventType(StrEnum):
    """The kinds of provider event the inbox stores (the DDL's `event_type` CHECK set)."""

    CALLBACK = "callback"
    REPLY = "reply"
    ANSWER = "answer"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class InboundEvent:
    """A validated, minimal provider event (never the whole raw update)."""

    external_event_id: str
    event_type: str  # an EventType
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class InboxRow:
    """An inbox row with its payload (and, once processed, its result)."""

    channel_id: str
    external_event_id: str
    event_type: str
    payload: dict[str, Any]
    received_at: int
    processed_at: int | None
    result: Any = None

    def mark_processed(self, conn: apsw.Connection, result: dict[str, Any], now: int) -> None:
        """Record the result; a row is processed exactly once."""
        conn.execute(
            "UPDATE channel_inbox SET processed_at = :now, result_hash = :result"
            " WHERE channel_id = :c AND external_event_id = :e AND processed_at IS NULL",
            {"now": now, "result": blobs.put_json(conn, result, now), "c": self.channel_id,
             "e": self.external_event_id},
        )
        if conn.changes() != 1:
            raise WriteRejected(
                f"inbox event {self.external_event_id} is already processed or unknown")


def ingest(
    conn: apsw.Connection,
    lease: Lease,
    channel_id: str,
    events: Sequence[InboundEvent],
    now: int,
    *,
    cursor_key: str | None = None,
    next_cursor: int | None = None,
) -> int:
    """Insert a batch (deduplicated) and advance the cursor in the caller's one transaction,
    fenced by the channel lease. Returns how many rows were new."""
    verify(conn, lease, channel_id, now)
    new = 0
    for event in events:
        conn.execute(
            "INSERT INTO channel_inbox (channel_id, external_event_id, event_type, payload_hash,"
            " received_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (channel_id, external_event_id) DO NOTHING",
            (channel_id, event.external_event_id, event.event_type,
             blobs.put_json(conn, event.payload, now), now),
        )
        new += conn.changes()
    if cursor_key is not None and next_cursor is not None:
        advance_numeric_cursor(conn, channel_id, cursor_key, next_cursor, now)
    if new or next_cursor is not None:
        resources.bump_current(
            conn, channel_resource(channel_id), "channel.updates_received", lease.actor, now,
            payload={"received": len(events), "new": new, "cursor": next_cursor},
            lease_generation=lease.generation,
        )
    return new


def unprocessed(conn: apsw.Connection, channel_id: str, limit: int = 1000) -> list[InboxRow]:
    """Inbox rows not yet processed, in arrival order."""
    rows = conn.execute(
        f"SELECT {_INBOX_COLUMNS} FROM channel_inbox WHERE channel_id = ? AND processed_at IS NULL"
        " ORDER BY rowid LIMIT ?",
        (channel_id, limit),
    ).fetchall()
    return [_inbox_row(conn, r) for r in rows]


_INBOX_COLUMNS = (
    "channel_id, external_event_id, event_type, payload_hash, received_at, processed_at,"
    " result_hash"
)


def _inbox_row(conn: apsw.Connection, r: Any) -> InboxRow:
    return InboxRow(r[0], r[1], r[2], blobs.get_json(conn, bytes(r[3])), r[4], r[5],
                    None if r[6] is None else blobs.get_json(conn, bytes(r[6])))


def get_inbox(conn: apsw.Connection, channel_id: str, external_event_id: str) -> InboxRow | None:
    """One inbox row."""
    r = conn.execute(
        f"SELECT {_INBOX_COLUMNS} FROM channel_inbox"
        " WHERE channel_id = ? AND external_event_id = ?",
        (channel_id, external_event_id),
    ).fetchone()
    return None if r is None else _inbox_row(conn, r)


def inbox_result(conn: apsw.Connection, channel_id: str, external_event_id: str) -> Any:
    """The recorded processing result of an inbox row (None while unprocessed)."""
    h = conn.execute(
        "SELECT result_hash FROM channel_inbox WHERE channel_id = ? AND external_event_id = ?",
        (channel_id, external_event_id),
    ).get
    return None if h is None else blobs.get_json(conn, bytes(h))


def inbox_counts(conn: apsw.Connection, channel_id: str) -> tuple[int, int]:
    """(unprocessed, total) rows."""
    row: Any = conn.execute(
        "SELECT count(*) - count(processed_at), count(*) FROM channel_inbox WHERE channel_id = ?",
        (channel_id,),
    ).fetchone()
    return int(row[0]), int(row[1])
