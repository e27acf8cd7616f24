"""Channel transport state: channels, their leases and cursors, the inbox, messages and parts.

Every adapter (Telegram, Pi) shares these tables and rules:
- a channel is a `channel` resource with its own lease; every write below re-checks it;
- `channel_inbox` is the deduplicated log of inbound provider events, each processed exactly
  once with a result (`ignored:<reason>` included), in the transaction of its consequences;
- a message part row without provider references is a send *intent*: written before the send,
  completed after a confirmed send, removed only when the send provably did not happen.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import apsw

from state import blobs, leases, resources
from state.clock import Entropy
from state.errors import WriteRejected
from state.leases import Lease

AdapterType = Literal["pi", "telegram"]
Purpose = Literal["delivery", "settlement", "prompt"]
MessageStatus = Literal["pending", "confirmed", "failed", "ambiguous"]
TELEGRAM_CURSOR = "telegram_update"


def _hex40(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]


def telegram_channel_id(profile: str) -> str:
    """`telegram-` + 40 hex of SHA-256(profile name) (reference identity)."""
    return "telegram-" + _hex40(profile)


def pi_channel_id(session_id: str | None) -> str:
    """`pi-` + 40 hex of SHA-256(session id, or `local` for the operator view)."""
    return "pi-" + _hex40(session_id or "local")


def channel_resource(channel_id: str) -> str:
    """Resource id of a channel."""
    return f"channel:{channel_id}"


def message_id_for(channel_id: str, purpose: Purpose, *parts: str) -> str:
    """Deterministic message id, so a retried effect finds its own row."""
    return f"{purpose}-" + _hex40("\0".join([channel_id, *parts]))


# -- channels and leases -----------------------------------------------------------------------


def ensure_channel(
    conn: apsw.Connection, channel_id: str, adapter: AdapterType, profile_key: str, now: int
) -> None:
    """Register the channel (resource + row) on first use; idempotent."""
    exists = conn.execute("SELECT 1 FROM channels WHERE channel_id = ?", (channel_id,)).get
    if exists:
        return
    resource_id = channel_resource(channel_id)
    resources.create(conn, resource_id, "channel", resources.SYSTEM, now,
                     event_type="channel.registered", payload={"adapter": adapter})
    conn.execute(
        "INSERT INTO channels (channel_id, resource_id, adapter_type, profile_key, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (channel_id, resource_id, adapter, profile_key, now),
    )


def claim(
    conn: apsw.Connection, channel_id: str, owner_id: str, now: int, entropy: Entropy
) -> Lease:
    """Claim the channel lease (LeaseHeld when a live owner has it)."""
    return leases.claim(conn, channel_resource(channel_id), "channel", owner_id, now, entropy)


def verify(conn: apsw.Connection, lease: Lease, channel_id: str, now: int) -> None:
    """The lease must be this channel's live lease."""
    if lease.resource_id != channel_resource(channel_id):
        raise WriteRejected(f"the lease is not for channel {channel_id}")
    leases.verify(conn, lease, now)


# -- cursors -----------------------------------------------------------------------------------


def cursor(conn: apsw.Connection, channel_id: str, key: str) -> str | None:
    """The stored cursor value, or None."""
    value = conn.execute(
        "SELECT cursor_value FROM channel_cursors WHERE channel_id = ? AND cursor_key = ?",
        (channel_id, key),
    ).get
    return None if value is None else str(value)


def _advance_numeric_cursor(
    conn: apsw.Connection, channel_id: str, key: str, value: int, now: int
) -> None:
    """Upsert as a numeric maximum: a cursor never moves back."""
    current = cursor(conn, channel_id, key)
    if current is not None and int(current) >= value:
        return
    conn.execute(
        "INSERT INTO channel_cursors (channel_id, cursor_key, cursor_value, updated_at)"
        " VALUES (:c, :k, :v, :now) ON CONFLICT (channel_id, cursor_key)"
        " DO UPDATE SET cursor_value = excluded.cursor_value, updated_at = excluded.updated_at",
        {"c": channel_id, "k": key, "v": str(value), "now": now},
    )


def set_cursor(conn: apsw.Connection, lease: Lease, channel_id: str, key: str, value: str,
               now: int) -> None:
    """Set a non-numeric cursor (owner only)."""
    verify(conn, lease, channel_id, now)
    conn.execute(
        "INSERT INTO channel_cursors (channel_id, cursor_key, cursor_value, updated_at)"
        " VALUES (:c, :k, :v, :now) ON CONFLICT (channel_id, cursor_key)"
        " DO UPDATE SET cursor_value = excluded.cursor_value, updated_at = excluded.updated_at",
        {"c": channel_id, "k": key, "v": value, "now": now},
    )


# -- inbox -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InboundEvent:
    """A validated, minimal provider event (never the whole raw update)."""

    external_event_id: str
    event_type: str  # callback | reply | answer | other
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class InboxRow:
    """An inbox row with its payload."""

    channel_id: str
    external_event_id: str
    event_type: str
    payload: dict[str, Any]
    received_at: int
    processed_at: int | None


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
        _advance_numeric_cursor(conn, channel_id, cursor_key, next_cursor, now)
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
    "channel_id, external_event_id, event_type, payload_hash, received_at, processed_at"
)


def _inbox_row(conn: apsw.Connection, r: Any) -> InboxRow:
    return InboxRow(r[0], r[1], r[2], blobs.get_json(conn, bytes(r[3])), r[4], r[5])


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


def mark_processed(
    conn: apsw.Connection, channel_id: str, external_event_id: str, result: dict[str, Any],
    now: int,
) -> None:
    """Record the result; a row is processed exactly once."""
    conn.execute(
        "UPDATE channel_inbox SET processed_at = :now, result_hash = :result"
        " WHERE channel_id = :c AND external_event_id = :e AND processed_at IS NULL",
        {"now": now, "result": blobs.put_json(conn, result, now), "c": channel_id,
         "e": external_event_id},
    )
    if conn.changes() != 1:
        raise WriteRejected(f"inbox event {external_event_id} is already processed or unknown")


def inbox_counts(conn: apsw.Connection, channel_id: str) -> tuple[int, int]:
    """(unprocessed, total) rows."""
    row: Any = conn.execute(
        "SELECT count(*) - count(processed_at), count(*) FROM channel_inbox WHERE channel_id = ?",
        (channel_id,),
    ).fetchone()
    return int(row[0]), int(row[1])


# -- messages and parts ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MessageRow:
    """A channel message (delivery, prompt or settlement)."""

    message_id: str
    channel_id: str
    decision_id: str | None
    purpose: str
    status: str
    conversation_ref: str | None
    message_ref: str | None


@dataclass(frozen=True, slots=True)
class PartRow:
    """One part to one recipient; refs are None while it is only an intent."""

    message_id: str
    recipient_index: int
    part_index: int
    conversation_ref: str | None
    message_ref: str | None

    @property
    def is_intent(self) -> bool:
        return self.message_ref is None


def ensure_message(
    conn: apsw.Connection,
    message_id: str,
    channel_id: str,
    decision_id: str | None,
    purpose: Purpose,
    text: str,
    now: int,
) -> MessageRow:
    """Create the message row (pending) if it does not exist; return it."""
    conn.execute(
        "INSERT INTO channel_messages (message_id, channel_id, decision_id, purpose, content_hash,"
        " status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)"
        " ON CONFLICT (message_id) DO NOTHING",
        (message_id, channel_id, decision_id, purpose, blobs.put_text(conn, text, now), now, now),
    )
    found = get_message(conn, message_id)
    assert found is not None
    return found


def get_message(conn: apsw.Connection, message_id: str) -> MessageRow | None:
    """One message row."""
    r = conn.execute(
        "SELECT message_id, channel_id, decision_id, purpose, status, external_conversation_ref,"
        " external_message_ref FROM channel_messages WHERE message_id = ?",
        (message_id,),
    ).fetchone()
    return None if r is None else MessageRow(*r)


def set_message_status(
    conn: apsw.Connection,
    message_id: str,
    status: MessageStatus,
    now: int,
    *,
    conversation_ref: str | None = None,
    message_ref: str | None = None,
) -> None:
    """Move a message to a new status (refs are kept when not given)."""
    conn.execute(
        "UPDATE channel_messages SET status = :status, updated_at = :now,"
        " external_conversation_ref = coalesce(:conv, external_conversation_ref),"
        " external_message_ref = coalesce(:msg, external_message_ref) WHERE message_id = :id",
        {"status": status, "now": now, "conv": conversation_ref, "msg": message_ref,
         "id": message_id},
    )


def parts(conn: apsw.Connection, message_id: str) -> list[PartRow]:
    """All part rows of a message, by recipient then part."""
    rows = conn.execute(
        "SELECT message_id, recipient_index, part_index, external_conversation_ref,"
        " external_message_ref FROM channel_message_parts WHERE message_id = ?"
        " ORDER BY recipient_index, part_index",
        (message_id,),
    )
    return [PartRow(*r) for r in rows]


def write_part_intent(
    conn: apsw.Connection, message_id: str, recipient: int, part: int, text: str, now: int
) -> None:
    """The intent row, committed before the send."""
    conn.execute(
        "INSERT INTO channel_message_parts (message_id, recipient_index, part_index, content_hash)"
        " VALUES (?, ?, ?, ?)",
        (message_id, recipient, part, blobs.put_text(conn, text, now)),
    )


def confirm_part(
    conn: apsw.Connection, message_id: str, recipient: int, part: int, conversation_ref: str,
    message_ref: str,
) -> None:
    """Record the provider references of a sent part (also used to reconcile one)."""
    conn.execute(
        "UPDATE channel_message_parts SET external_conversation_ref = ?, external_message_ref = ?"
        " WHERE message_id = ? AND recipient_index = ? AND part_index = ?",
        (conversation_ref, message_ref, message_id, recipient, part),
    )


def remove_part_intent(conn: apsw.Connection, message_id: str, recipient: int, part: int) -> None:
    """The send provably did not happen: the part is unsent again."""
    conn.execute(
        "DELETE FROM channel_message_parts WHERE message_id = ? AND recipient_index = ?"
        " AND part_index = ? AND external_message_ref IS NULL",
        (message_id, recipient, part),
    )


def messages_for_decision(
    conn: apsw.Connection, channel_id: str, decision_id: str, purposes: Iterable[Purpose]
) -> list[MessageRow]:
    """Messages of a decision on a channel."""
    wanted = tuple(purposes)
    marks = ",".join("?" * len(wanted))
    rows = conn.execute(
        "SELECT message_id, channel_id, decision_id, purpose, status, external_conversation_ref,"
        f" external_message_ref FROM channel_messages WHERE decision_id = ? AND channel_id = ?"
        f" AND purpose IN ({marks}) ORDER BY created_at, message_id",
        (decision_id, channel_id, *wanted),
    )
    return [MessageRow(*r) for r in rows]


def find_message_by_ref(
    conn: apsw.Connection, channel_id: str, purpose: Purpose, conversation_ref: str,
    message_ref: str,
) -> MessageRow | None:
    """A message whose own references match (prompts are single-part)."""
    r = conn.execute(
        "SELECT message_id, channel_id, decision_id, purpose, status, external_conversation_ref,"
        " external_message_ref FROM channel_messages WHERE channel_id = ? AND purpose = ?"
        " AND external_conversation_ref = ? AND external_message_ref = ?",
        (channel_id, purpose, conversation_ref, message_ref),
    ).fetchone()
    return None if r is None else MessageRow(*r)


def delivery_counts(conn: apsw.Connection, channel_id: str) -> dict[str, int]:
    """Delivery messages by status."""
    return {str(s): int(n) for s, n in conn.execute(
        "SELECT status, count(*) FROM channel_messages WHERE channel_id = ?"
        " AND purpose = 'delivery' GROUP BY status", (channel_id,))}


def channel_row(conn: apsw.Connection, channel_id: str) -> tuple[str, str] | None:
    """(adapter_type, profile_key) of a registered channel."""
    r = conn.execute("SELECT adapter_type, profile_key FROM channels WHERE channel_id = ?",
                     (channel_id,)).fetchone()
    return None if r is None else (str(r[0]), str(r[1]))


def all_channels(conn: apsw.Connection) -> list[tuple[str, str, str]]:
    """(channel_id, adapter_type, profile_key) of every registered channel."""
    return [(str(a), str(b), str(c)) for a, b, c in conn.execute(
        "SELECT channel_id, adapter_type, profile_key FROM channels ORDER BY adapter_type,"
        " profile_key")]


# -- provider errors (for status) --------------------------------------------------------------


def record_provider_error(
    conn: apsw.Connection, lease: Lease, channel_id: str, error: dict[str, Any], now: int
) -> None:
    """Keep the last provider error as a channel event (codes and descriptions, no ids)."""
    verify(conn, lease, channel_id, now)
    resources.bump_current(conn, channel_resource(channel_id), "channel.provider_error",
                           lease.actor, now, payload=error, lease_generation=lease.generation)


def last_provider_error(conn: apsw.Connection, channel_id: str) -> dict[str, Any] | None:
    """The most recent recorded provider error, with its time."""
    row = conn.execute(
        "SELECT payload_hash, recorded_at FROM events WHERE resource_id = ?"
        " AND event_type = 'channel.provider_error' ORDER BY resource_revision DESC LIMIT 1",
        (channel_resource(channel_id),),
    ).fetchone()
    if row is None or row[0] is None:
        return None
    return {**blobs.get_json(conn, bytes(row[0])), "at": row[1]}


def unconfirmed_text(conn: apsw.Connection, message_id: str) -> str | None:
    """The text of a single-part message whose part is still an intent (else None)."""
    row = conn.execute(
        "SELECT m.content_hash FROM channel_messages m JOIN channel_message_parts p"
        " USING (message_id) WHERE m.message_id = ? AND p.external_message_ref IS NULL",
        (message_id,),
    ).fetchone()
    return None if row is None else blobs.get_text(conn, bytes(row[0]))


def message_has_intents(conn: apsw.Connection, message_id: str) -> bool:
    """Whether any part of the message is an unconfirmed intent (maybe sent)."""
    return any(p.is_intent for p in parts(conn, message_id))
