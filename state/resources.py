"""Resources (one revision counter per mutable item) and their immutable events.

A command names the revision it expects; success moves n -> n+1 and inserts event n+1 in the
same transaction. A command that changes two resources bumps each exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import apsw

from state.blobs import put_json
from state.canonical import JsonValue
from state.errors import StaleRevision, WriteRejected
from state.ids import digest_id, number_id

__all__ = [
    "SYSTEM", "Actor", "ActorType", "ResourceType", "bump", "bump_current", "create",
    "create_follow_up", "current_revision", "event_id_for",
]


class ResourceType(StrEnum):
    """What a resource is (the DDL's `resources.resource_type` CHECK set)."""

    RUN = "run"
    DECISION = "decision"
    CONTROLLER = "controller"
    EFFECT = "effect"
    CHANNEL = "channel"
    SESSION = "session"


class ActorType(StrEnum):
    """Who performs a change (the DDL's `events.actor_type` CHECK set)."""

    SESSION = "session"
    HOST = "host"
    CONTROLLER = "controller"
    CHANNEL = "channel"
    HUMAN = "human"
    POLICY = "policy"
    CONTROL = "control"
    SYSTEM = "system"


@dataclass(frozen=True, slots=True)
class Actor:
    """Who performs a change (private ids stay in the database, never in output)."""

    type: ActorType
    id: str | None = None


SYSTEM = Actor(ActorType.SYSTEM)


def create(
    conn: apsw.Connection,
    resource_id: str,
    resource_type: ResourceType,
    actor: Actor,
    now: int,
    *,
    event_type: str | None = None,
    payload: JsonValue = None,
    lease_generation: int | None = None,
) -> int:
    """Insert a new resource and record its creation as event revision 1.

    Revision 0 is the state before creation; the creation itself is the first accepted change.
    """
    try:
        conn.execute(
            "INSERT INTO resources (resource_id, resource_type, revision, created_at, updated_at)"
            " VALUES (?, ?, 1, ?, ?)",
            (resource_id, resource_type, now, now),
        )
    except apsw.ConstraintError as exc:
        raise WriteRejected(f"resource {resource_id} already exists") from exc
    _insert_event(conn, resource_id, 1, event_type or f"{resource_type}.created", actor, now,
                  payload, lease_generation)
    return 1


def create_follow_up(
    conn: apsw.Connection, resource_id: str, resource_type: ResourceType, now: int
) -> None:
    """Insert a resource at revision 0, without an event: an item created by another
    resource's accepted change (an effect reserved in its source's transaction), which that
    change's event records (the effect row names its source and source revision). Its own
    first change (a claim, an attempt, a cancellation) is its revision 1."""
    try:
        conn.execute(
            "INSERT INTO resources (resource_id, resource_type, revision, created_at, updated_at)"
            " VALUES (?, ?, 0, ?, ?)",
            (resource_id, resource_type, now, now),
        )
    except apsw.ConstraintError as exc:
        raise WriteRejected(f"resource {resource_id} already exists") from exc


def current_revision(conn: apsw.Connection, resource_id: str) -> int | None:
    """The current revision, or None when the resource does not exist."""
    value = conn.execute(
        "SELECT revision FROM resources WHERE resource_id = ?", (resource_id,)
    ).get
    return None if value is None else int(value)


def bump(
    conn: apsw.Connection,
    resource_id: str,
    expected_revision: int,
    event_type: str,
    actor: Actor,
    now: int,
    *,
    payload: JsonValue = None,
    lease_generation: int | None = None,
) -> int:
    """Move `resource_id` from `expected_revision` to the next and insert its event."""
    conn.execute(
        "UPDATE resources SET revision = revision + 1, updated_at = :now"
        " WHERE resource_id = :id AND revision = :expected",
        {"now": now, "id": resource_id, "expected": expected_revision},
    )
    if conn.changes() != 1:
        current = current_revision(conn, resource_id)
        raise StaleRevision(
            f"{resource_id} is at revision {current}, not {expected_revision}"
            if current is not None
            else f"{resource_id} does not exist"
        )
    revision = expected_revision + 1
    _insert_event(conn, resource_id, revision, event_type, actor, now, payload, lease_generation)
    return revision


def event_id_for(resource_id: str, revision: int, now: int) -> str:
    """The public id of the event that moved `resource_id` to `revision` at `now`: the time
    (7 sorted characters, to the year 2109; 8 after) then 66 bits of (resource, revision),
    itself unique. 18 characters (an earlier version wrote 33: `evt-<12 hex>-<16 hex>`; those
    stay as they are, ids are never recomputed)."""
    at = max(now, 0)
    return number_id(at, 7 if at < 64**7 else 8) + digest_id(f"{resource_id}@{revision}", 11)


def _insert_event(
    conn: apsw.Connection,
    resource_id: str,
    revision: int,
    event_type: str,
    actor: Actor,
    now: int,
    payload: JsonValue,
    lease_generation: int | None,
) -> None:
    payload_hash = None if payload is None else put_json(conn, payload, now)
    conn.execute(
        "INSERT INTO events (event_id, resource_id, resource_revision, event_type, actor_type,"
        " actor_id, lease_generation, payload_hash, recorded_at)"
        " VALUES (:event_id, :id, :revision, :type, :actor_type, :actor_id, :generation,"
        " :payload, :now)",
        {
            # Time-first ids keep the unique index append-only (one page per commit); a
            # short id, as it is stored twice (the row and its unique index) for every event.
            "event_id": event_id_for(resource_id, revision, now),
            "id": resource_id,
            "revision": revision,
            "type": event_type,
            "actor_type": actor.type,
            "actor_id": actor.id,
            "generation": lease_generation,
            "payload": payload_hash,
            "now": now,
        },
    )


def bump_current(
    conn: apsw.Connection,
    resource_id: str,
    event_type: str,
    actor: Actor,
    now: int,
    *,
    payload: JsonValue = None,
    lease_generation: int | None = None,
) -> int:
    """Bump a resource whose current revision the caller has already authorised in this
    transaction (for example through its lease); still exactly one event."""
    current = current_revision(conn, resource_id)
    if current is None:
        raise StaleRevision(f"{resource_id} does not exist")
    return bump(
        conn, resource_id, current, event_type, actor, now,
        payload=payload, lease_generation=lease_generation,
    )
