"""The `channels`, `channel_cursors` and provider-error records every channel shares.

Each channel is a `channel` resource with its own lease; every write re-checks that lease
inside the caller's transaction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import apsw

from state import blobs, leases, resources
from state.clock import Entropy
from state.errors import WriteRejected
from state.leases import Lease, OwnerType
from state.resources import ResourceType

__all__ = [
    "AdapterType", "advance_numeric_cursor", "all_channels", "channel_resource", "channel_row",
    "claim", "claim_or_take_over", "cursor", "ensure_channel", "hex40", "last_provider_error",
    "record_provider_error", "record_reservations", "set_cursor", "set_cursor_for_effect",
    "telegram_channel_id", "verify",
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
    conn: apsw.Connection, channel_id: str, owner_id: str, now: int, entropy: Entropy
) -> Lease:
    """Claim the channel lease (LeaseHeld when a live owner has it)."""
    return leases.claim(conn, channel_resource(channel_id), OwnerType.CHANNEL, owner_id, now,
                        entropy)


def claim_or_take_over(
    conn: apsw.Connection, channel_id: str, owner_id: str, now: int, entropy: Entropy,
    owner_gone: Callable[[str], bool],
) -> Lease:
    """Claim the channel lease, taking it over at once from a live-looking owner whose process
    is gone (a killed poller cannot release it; waiting out its expiry, or an hour after the
    clock stepped back, would stop the channel). LeaseHeld when a live owner has it."""
    resource = channel_resource(channel_id)
    held = leases.read(conn, resource)
    if held is not None and held.is_live(now) and held.owner_id and owner_gone(held.owner_id):
        return leases.claim(conn, resource, OwnerType.CHANNEL, owner_id, now, entropy,
                            dead_owner_id=held.owner_id)
    return claim(conn, channel_id, owner_id, now, entropy)


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


def set_cursor_for_effect(conn: apsw.Connection, lease: Lease, channel_id: str, key: str,
                          value: str, now: int) -> None:
    """Set a non-numeric cursor under the live lease of one of the channel's effect attempts
    (what the attempt found is recorded by the one applying it)."""
    lease.verify(conn, now)
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


def record_provider_error(
    conn: apsw.Connection, lease: Lease, channel_id: str, error: dict[str, Any], now: int
) -> None:
    """Keep the last provider error as a channel event (codes and descriptions, no ids)."""
    verify(conn, lease, channel_id, now)
    resources.bump_current(conn, channel_resource(channel_id), "channel.provider_error",
                           lease.actor, now, payload=error, lease_generation=lease.generation)


def record_reservations(conn: apsw.Connection, lease: Lease, channel_id: str,
                        effect_ids: list[str], now: int) -> None:
    """One channel event records the effects its owner reserved in this transaction (each
    starts at revision 0, as a follow-up does): one event for a pass's new deliveries, not
    one per delivery."""
    verify(conn, lease, channel_id, now)
    resources.bump_current(conn, channel_resource(channel_id), "channel.effects_reserved",
                           lease.actor, now, payload={"effects": sorted(effect_ids)},
                           lease_generation=lease.generation)


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
