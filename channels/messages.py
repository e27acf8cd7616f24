"""`channel_messages` and `channel_message_parts`: what was sent where, part by part.

A part row written before its send is the intent; its provider reference is written after a
confirmed send. A row without a reference is ambiguous and never re-sent automatically.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import apsw

from channels.store import hex40
from state import blobs

__all__ = [
    "ID_HEX", "Message", "MessageRow", "MessageStatus", "Purpose", "delivery_counts",
    "ensure_message", "find_message_by_part_ref", "find_message_by_ref", "get_message",
    "message_id_for", "messages_for_decision",
]


class Purpose(StrEnum):
    """What a channel message is for (`channel_messages.purpose`)."""

    DELIVERY = "delivery"
    SETTLEMENT = "settlement"
    PROMPT = "prompt"


class MessageStatus(StrEnum):
    """Where a channel message stands (`channel_messages.status`)."""

    PENDING = "pending"
    CONFIRMED = "confirmed"
    FAILED = "failed"
    AMBIGUOUS = "ambiguous"


ID_HEX = 20  # 80 bits; earlier versions wrote 40 hex digits (see `_stored_id`)


def message_id_for(channel_id: str, purpose: Purpose, *parts: str) -> str:
    """Deterministic message id, so a retried effect finds its own row. 80 bits: a message
    id is stored four times (its row, its parts' rows and their two keys)."""
    return f"{purpose}-" + hex40("\0".join([channel_id, *parts]))[:ID_HEX]


def _stored_id(conn: apsw.Connection, message_id: str) -> str:
    """The id a message is stored under: `message_id` itself, or the id an earlier version
    gave the same message, which begins with it (the same digest, 40 hex digits long); a
    message not stored yet keeps `message_id`. Every function here takes either and finds the
    row, so messages of a database written before keep their rows: never a second one (a
    part that may have been sent would be sent again). One search of the primary key, once
    per connection for a stored message: a message row is never deleted or renamed, so the
    id found stays its id (a settlement looks its message up seven times)."""
    known = _STORED.get(conn)
    if known is None:
        known = _STORED[conn] = {}
    elif (cached := known.get(message_id)) is not None:
        return cached
    found = conn.execute(
        "SELECT message_id FROM channel_messages WHERE message_id >= ?1"
        " AND message_id < ?1 || 'g' ORDER BY message_id LIMIT 1", (message_id,)).get
    if found is None:  # not stored yet: looked up again until it is
        return message_id
    if len(known) >= _STORED_MAX:
        known.clear()
    known[message_id] = str(found)
    return str(found)


# The ids `_stored_id` found, per connection (bounded: a long `poll --for` sees many messages).
_STORED: weakref.WeakKeyDictionary[apsw.Connection, dict[str, str]] = weakref.WeakKeyDictionary()
_STORED_MAX = 4096


@dataclass(frozen=True, slots=True)
class _PartRow:
    """One part to one recipient; refs are None while it is only an intent."""

    message_id: str
    recipient_index: int
    part_index: int
    conversation_ref: str | None
    message_ref: str | None

    @property
    def is_intent(self) -> bool:
        return self.message_ref is None


@dataclass(frozen=True, slots=True)
class Message:
    """A channel message by its id (a deterministic `message_id_for`, or a stored row's): its
    parts, written as intents before their sends and confirmed after, and its status. Each
    method finds the row under the id an earlier version gave it too (`_stored_id`)."""

    message_id: str

    def stored_id(self, conn: apsw.Connection) -> str:
        """The id this message is stored under (see `_stored_id`)."""
        return _stored_id(conn, self.message_id)

    def parts(self, conn: apsw.Connection) -> list[_PartRow]:
        """All part rows of the message, by recipient then part."""
        rows = conn.execute(
            "SELECT message_id, recipient_index, part_index, external_conversation_ref,"
            " external_message_ref FROM channel_message_parts WHERE message_id = ?"
            " ORDER BY recipient_index, part_index",
            (self.stored_id(conn),),
        )
        return [_PartRow(*r) for r in rows]

    def placed_parts(self, conn: apsw.Connection) -> dict[tuple[int, int], _PartRow]:
        """The part rows by (recipient, part): what a send looks up before each part."""
        return {(p.recipient_index, p.part_index): p for p in self.parts(conn)}

    def has_intents(self, conn: apsw.Connection) -> bool:
        """Whether any part of the message is an unconfirmed intent (maybe sent)."""
        return any(p.is_intent for p in self.parts(conn))

    def write_intent(self, conn: apsw.Connection, recipient: int, part: int, text: str,
                     now: int) -> None:
        """A part's intent row, committed before its send."""
        conn.execute(
            "INSERT INTO channel_message_parts (message_id, recipient_index, part_index,"
            " content_hash) VALUES (?, ?, ?, ?)",
            (self.stored_id(conn), recipient, part, blobs.put_text(conn, text, now)),
        )

    def confirm(self, conn: apsw.Connection, recipient: int, part: int, conversation_ref: str,
                message_ref: str) -> None:
        """Record the provider references of a sent part (also used to reconcile one)."""
        conn.execute(
            "UPDATE channel_message_parts SET external_conversation_ref = ?,"
            " external_message_ref = ? WHERE message_id = ? AND recipient_index = ?"
            " AND part_index = ?",
            (conversation_ref, message_ref, self.stored_id(conn), recipient, part),
        )

    def unsend(self, conn: apsw.Connection, recipient: int, part: int) -> None:
        """The part's send provably did not happen: its intent goes, the part is unsent again."""
        conn.execute(
            "DELETE FROM channel_message_parts WHERE message_id = ? AND recipient_index = ?"
            " AND part_index = ? AND external_message_ref IS NULL",
            (self.stored_id(conn), recipient, part),
        )

    def set_status(self, conn: apsw.Connection, status: MessageStatus, now: int, *,
                   conversation_ref: str | None = None, message_ref: str | None = None) -> None:
        """Move the message to a new status (refs are kept when not given)."""
        conn.execute(
            "UPDATE channel_messages SET status = :status, updated_at = :now,"
            " external_conversation_ref = coalesce(:conv, external_conversation_ref),"
            " external_message_ref = coalesce(:msg, external_message_ref) WHERE message_id = :id",
            {"status": status, "now": now, "conv": conversation_ref, "msg": message_ref,
             "id": self.stored_id(conn)},
        )

    def unconfirmed_text(self, conn: apsw.Connection) -> str | None:
        """The text of a single-part message whose part is still an intent (else None)."""
        row = conn.execute(
            "SELECT m.content_hash FROM channel_messages m JOIN channel_message_parts p"
            " USING (message_id) WHERE m.message_id = ? AND p.external_message_ref IS NULL",
            (self.stored_id(conn),),
        ).fetchone()
        return None if row is None else blobs.get_text(conn, bytes(row[0]))


@dataclass(frozen=True, slots=True)
class MessageRow(Message):
    """A channel message (delivery, prompt or settlement) as its row stands."""

    channel_id: str
    decision_id: str | None
    purpose: Purpose
    status: MessageStatus
    conversation_ref: str | None
    message_ref: str | None

    @classmethod
    def from_row(cls, r: Sequence[Any]) -> MessageRow:
        return cls(r[0], r[1], r[2], Purpose(r[3]), MessageStatus(r[4]), r[5], r[6])


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
    message_id = _stored_id(conn, message_id)
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
    message_id = _stored_id(conn, message_id)
    r = conn.execute(
        "SELECT message_id, channel_id, decision_id, purpose, status, external_conversation_ref,"
        " external_message_ref FROM channel_messages WHERE message_id = ?",
        (message_id,),
    ).fetchone()
    return None if r is None else MessageRow.from_row(r)


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
    return [MessageRow.from_row(r) for r in rows]


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
    return None if r is None else MessageRow.from_row(r)


def find_message_by_part_ref(
    conn: apsw.Connection, channel_id: str, purpose: Purpose, conversation_ref: str,
    message_ref: str,
) -> MessageRow | None:
    """The message one of whose sent parts is this provider message (a card's part)."""
    r = conn.execute(
        "SELECT m.message_id, m.channel_id, m.decision_id, m.purpose, m.status,"
        " m.external_conversation_ref, m.external_message_ref FROM channel_message_parts p"
        " JOIN channel_messages m ON m.message_id = p.message_id"
        " WHERE p.external_conversation_ref = ? AND p.external_message_ref = ?"
        " AND m.channel_id = ? AND m.purpose = ? LIMIT 1",
        (conversation_ref, message_ref, channel_id, purpose),
    ).fetchone()
    return None if r is None else MessageRow.from_row(r)


def delivery_counts(conn: apsw.Connection, channel_id: str) -> dict[str, int]:
    """Delivery messages by status."""
    return {str(s): int(n) for s, n in conn.execute(
        "SELECT status, count(*) FROM channel_messages WHERE channel_id = ?"
        " AND purpose = 'delivery' GROUP BY status", (channel_id,))}
