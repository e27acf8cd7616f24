"""The `channels` and `channel_cursors` records every channel shares.

Each channel is a `channel` resource with its own lease; every write re-checks that lease
inside the caller's transaction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from enum import StrEnum

import apsw

from state import leases, resources
from state.clock import Entropy
from state.errors import WriteRejected
from state.leases import Lease, OwnerType
from state.resources import ResourceType

__all__ = [
    "AdapterType", "advance_numeric_cursor", "all_channels", "channel_resource", "channel_row",
    "claim", "cursor", "ensure_channel", "hex40", "set_cursor", "telegram_channel_id", "verify",
]


class AdapterType(StrEnum):
    """The provider a channel speaks to (the DDL's `channels.adapter_type` CHECK set)."""

    PI = "pi"
    TELEGRAM = "telegram"


def hex40(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]


def telegram_channel_id(profile: str) -> str:
    """`telegram-` + 40 hex of SHA-256(profile name) (reference identity)."""
    return "telegram-" + hex40(profile)


def channel_resource(channel_id: str) -> str:
    """Resource id of a channel."""
    return f"channel:{channel_id}"


def ensure_channel(
    conn: apsw.Connection, channel_id: str, adapter: AdapterType, profile_key: str, now: int
) -> None:
    """Register the channel (resource + row) on first use; idempotent."""
    exists = conn.execute("SELECT 1 FROM channels WHERE channel_id = ?", (channel_id,)).get
    if exists:
        return
    resource_id = channel_resource(channel_id)
    resources.create(conn, resource_id, ResourceType.CHANNEL, resources.SYSTEM, now,
                     event_type="channel.registered", payload={"adapter": adapter})
    conn.execute(
        "INSERT INTO channels (channel_id, resource_id, adapter_type, profile_key, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (channel_id, resource_id, adapter, profile_key, now),
    )


def claim(
    conn: apsw.Connection, channel_id: str, owner_id: str, now: int, entropy: Entropy, *,
    owner_gone: Callable[[str], bool] | None = None,
) -> Lease:
    """Claim the channel lease (LeaseHeld when a live owner has it). With `owner_gone`, a
    live-looking owner whose process is gone is taken over at once (a killed poller cannot
    release it; waiting out its expiry, or an hour after the clock stepped back, would stop
    the channel)."""
    resource = channel_resource(channel_id)
    if owner_gone is not None:
        held = leases.read(conn, resource)
        if held is not None and held.is_live(now) and held.owner_id and owner_gone(held.owner_id):
            return leases.claim(conn, resource, OwnerType.CHANNEL, owner_id, now, entropy,
                                dead_owner_id=held.owner_id)
    return leases.claim(conn, resource, OwnerType.CHANNEL, owner_id, now, entropy)


def verify(conn: apsw.Connection, lease: Lease, channel_id: str, now: int) -> None:
    """The lease must be this channel's live lease."""
    if lease.resource_id != channel_resource(channel_id):
        raise WriteRejected(f"the lease is not for channel {channel_id}")
    lease.verify(conn, now)


def cursor(conn: apsw.Connection, channel_id: str, key: str) -> str | None:
    """The stored cursor value, or None."""
    value = conn.execute(
        "SELECT cursor_value FROM channel_cursors WHERE channel_id = ? AND cursor_key = ?",
        (channel_id, key),
    ).get
    return None if value is None else str(value)


def advance_numeric_cursor(
    conn: apsw.Connection, channel_id: str, key: str, value: int, now: int
) -> None:
    """Upsert as a numeric maximum: a cursor never moves back."""
    current = cursor(conn, channel_id, key)
    if current is not None and int(current) >= value:
        return
    _write_cursor(conn, channel_id, key, str(value), now)


def set_cursor(conn: apsw.Connection, lease: Lease, channel_id: str, key: str, value: str,
               now: int, *, by_effect: bool = False) -> None:
    """Set a non-numeric cursor: the channel's owner only, or, `by_effect`, under the live
    lease of one of the channel's effect attempts (what the attempt found is recorded by the
    one applying it)."""
    if by_effect:
        lease.verify(conn, now)
    else:
        verify(conn, lease, channel_id, now)
    _write_cursor(conn, channel_id, key, value, now)


def _write_cursor(conn: apsw.Connection, channel_id: str, key: str, value: str,
                  now: int) -> None:
    conn.execute(
        "INSERT INTO channel_cursors (channel_id, cursor_key, cursor_value, updated_at)"
        " VALUES (:c, :k, :v, :now) ON CONFLICT (channel_id, cursor_key)"
        " DO UPDATE SET cursor_value = excluded.cursor_value, updated_at = excluded.updated_at",
        {"c": channel_id, "k": key, "v": value, "now": now},
    )


def channel_row(conn: apsw.Connection, channel_id: str) -> tuple[AdapterType, str] | None:
    """(adapter_type, profile_key) of a registered channel."""
    r = conn.execute("SELECT adapter_type, profile_key FROM channels WHERE channel_id = ?",
                     (channel_id,)).fetchone()
    return None if r is None else (AdapterType(r[0]), str(r[1]))


def all_channels(conn: apsw.Connection) -> list[tuple[str, AdapterType, str]]:
    """(channel_id, adapter_type, profile_key) of every registered channel."""
    return [(str(a), AdapterType(b), str(c)) for a, b, c in conn.execute(
        "SELECT channel_id, adapter_type, profile_key FROM channels ORDER BY adapter_type,"
        " profile_key")]
