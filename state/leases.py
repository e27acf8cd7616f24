"""Leases: who owns a resource now, with a durable generation that never resets.

The raw claim token is returned once and only its SHA-256 is stored. A claim of a free or
expired lease bumps the generation; release clears the owner and keeps the generation. Every
write that needs ownership re-checks owner, token hash, generation and expiry in its own
transaction: a `Lease` or `WritePermit` value is evidence, never authority by itself.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from enum import StrEnum

import apsw

from state import resources
from state.canonical import JsonValue, sha256
from state.clock import Entropy
from state.errors import LeaseHeld, StaleLease, StaleRevision, WriteRejected
from state.resources import Actor, ActorType

__all__ = [
    "RENEW_WHEN_LEFT_MS", "TTL_MS", "Lease", "LeaseState", "OwnerType", "WritePermit",
    "acquire_row", "brief_tenure", "claim", "clear_row", "read",
]


class OwnerType(StrEnum):
    """Who holds a lease (the DDL's `leases.owner_type` CHECK set)."""

    SESSION = "session"
    HOST = "host"
    CONTROLLER = "controller"
    CHANNEL = "channel"

    def actor(self, owner_id: str) -> Actor:
        """The actor a lease holder of this type acts as (the actor type of the same name)."""
        return Actor(ActorType(self.value), owner_id)


TTL_MS = 60_000
RENEW_WHEN_LEFT_MS = 20_000


@dataclass(frozen=True, slots=True)
class Lease:
    """Evidence of a successful claim."""

    resource_id: str
    owner_type: OwnerType
    owner_id: str
    generation: int
    expires_at: int
    token: str = field(repr=False)

    @property
    def actor(self) -> Actor:
        return OwnerType(self.owner_type).actor(self.owner_id)

    def needs_renewal(self, now: int) -> bool:
        """Whether 20 s or less remain, so that `renew` would extend it."""
        return self.expires_at - now <= RENEW_WHEN_LEFT_MS

    def verify(self, conn: apsw.Connection, now: int, *, allow_expired: bool = False) -> None:
        """Raise StaleLease unless this is still the current, unexpired ownership."""
        row = conn.execute(
            "SELECT generation, owner_type, owner_id, token_hash, expires_at FROM leases"
            " WHERE resource_id = ?",
            (self.resource_id,),
        ).fetchone()
        expected = (self.generation, self.owner_type, self.owner_id, _token_hash(self.token))
        if row is None or tuple(row[:4]) != expected:
            raise StaleLease(f"{self.resource_id} is no longer owned by this process")
        if not allow_expired and row[4] <= now:
            raise StaleLease(f"the lease on {self.resource_id} expired")

    def renew(self, conn: apsw.Connection, now: int, *, ttl_ms: int = TTL_MS) -> Lease:
        """Extend a live lease when 20 s or less remain; otherwise write nothing."""
        self.verify(conn, now)
        if not self.needs_renewal(now):
            return self
        conn.execute(
            "UPDATE leases SET heartbeat_at = :now, expires_at = :expires WHERE resource_id = :id",
            {"now": now, "expires": now + ttl_ms, "id": self.resource_id},
        )
        return replace(self, expires_at=now + ttl_ms)

    def release(self, conn: apsw.Connection, now: int, *, payload: JsonValue = None) -> None:
        """Release our lease (even if it just expired, as long as nobody claimed it since).
        `payload` lets the owner record what its tenure ended with, in the same event."""
        self.verify(conn, now, allow_expired=True)
        clear_row(conn, self.resource_id)
        kind = _resource_type(conn, self.resource_id)
        resources.bump_current(
            conn, self.resource_id, f"{kind}.lease_released", self.actor, now,
            payload=payload, lease_generation=self.generation,
        )


@dataclass(frozen=True, slots=True)
class WritePermit:
    """What a command claims to be allowed to do; the transaction verifies it again."""

    resource_id: str
    operation: str
    actor: Actor
    expected_revision: int | None
    lease: Lease | None = None

    def check(self, conn: apsw.Connection, now: int) -> None:
        """Re-verify the evidence inside the write transaction: the lease must be the
        resource's live lease, and the expected revision (when given) the current one."""
        if self.lease is not None:
            if self.lease.resource_id != self.resource_id:
                raise StaleLease(f"the lease is for {self.lease.resource_id}, not"
                                 f" {self.resource_id}")
            self.lease.verify(conn, now)
        if self.expected_revision is not None:
            current = resources.current_revision(conn, self.resource_id)
            if current != self.expected_revision:
                raise StaleRevision(f"{self.resource_id} is at revision {current}, not"
                                    f" {self.expected_revision} ({self.operation})")


@dataclass(frozen=True, slots=True)
class LeaseState:
    """A lease row as stored (owner fields are None when free)."""

    resource_id: str
    generation: int
    owner_type: str | None
    owner_id: str | None
    expires_at: int | None

    def is_live(self, now: int) -> bool:
        return self.owner_type is not None and self.expires_at is not None and self.expires_at > now


def _token_hash(token: str) -> bytes:
    """SHA-256 of the raw token text."""
    return sha256(token.encode("ascii"))


def read(conn: apsw.Connection, resource_id: str) -> LeaseState | None:
    """The stored lease row, or None when the resource was never claimed."""
    row = conn.execute(
        "SELECT generation, owner_type, owner_id, expires_at FROM leases WHERE resource_id = ?",
        (resource_id,),
    ).fetchone()
    if row is None:
        return None
    return LeaseState(resource_id, int(row[0]), row[1], row[2], row[3])


def acquire_row(
    conn: apsw.Connection,
    resource_id: str,
    owner_type: OwnerType,
    owner_id: str,
    now: int,
    entropy: Entropy,
    *,
    ttl_ms: int = TTL_MS,
) -> Lease:
    """Take a free or expired lease (no event: the caller records one for the command)."""
    state = read(conn, resource_id)
    if state is not None and state.is_live(now):
        raise LeaseHeld(f"{resource_id} is held by a live owner until {state.expires_at}")
    token = base64.urlsafe_b64encode(entropy.token_bytes(32)).rstrip(b"=").decode("ascii")
    generation = 1 if state is None else state.generation + 1
    values = {
        "id": resource_id,
        "generation": generation,
        "owner_type": owner_type,
        "owner_id": owner_id,
        "hash": _token_hash(token),
        "now": now,
        "expires": now + ttl_ms,
    }
    try:
        conn.execute(
            "INSERT INTO leases (resource_id, generation, owner_type, owner_id, token_hash,"
            " acquired_at, heartbeat_at, expires_at)"
            " VALUES (:id, :generation, :owner_type, :owner_id, :hash, :now, :now, :expires)"
            " ON CONFLICT (resource_id) DO UPDATE SET generation = excluded.generation,"
            " owner_type = excluded.owner_type, owner_id = excluded.owner_id,"
            " token_hash = excluded.token_hash, acquired_at = excluded.acquired_at,"
            " heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at",
            values,
        )
    except apsw.ConstraintError as exc:
        raise WriteRejected(f"{resource_id} is not a resource") from exc
    return Lease(resource_id, owner_type, owner_id, generation, now + ttl_ms, token)


def _resource_type(conn: apsw.Connection, resource_id: str) -> str:
    kind = conn.execute(
        "SELECT resource_type FROM resources WHERE resource_id = ?", (resource_id,)
    ).get
    if kind is None:
        raise WriteRejected(f"{resource_id} is not a resource")
    return str(kind)


def claim(
    conn: apsw.Connection,
    resource_id: str,
    owner_type: OwnerType,
    owner_id: str,
    now: int,
    entropy: Entropy,
    *,
    ttl_ms: int = TTL_MS,
    dead_owner_id: str | None = None,
) -> Lease:
    """Claim a free or expired lease and record `<type>.lease_acquired`. `dead_owner_id`: a
    live-looking owner the caller knows is dead (its process is gone), whose lease is taken
    over first, recording `<type>.lease_taken_over`; LeaseHeld when someone else holds it."""
    if dead_owner_id is not None:
        _take_over(conn, resource_id, dead_owner_id, OwnerType(owner_type).actor(owner_id), now)
    kind = _resource_type(conn, resource_id)
    lease = acquire_row(conn, resource_id, owner_type, owner_id, now, entropy, ttl_ms=ttl_ms)
    resources.bump_current(
        conn,
        resource_id,
        f"{kind}.lease_acquired",
        lease.actor,
        now,
        payload={"generation": lease.generation, "expiresAt": lease.expires_at},
        lease_generation=lease.generation,
    )
    return lease


def _take_over(conn: apsw.Connection, resource_id: str, dead_owner_id: str, actor: Actor,
               now: int) -> None:
    """Free a live-looking lease of a dead owner (the claim that follows takes it)."""
    state = read(conn, resource_id)
    if state is not None and state.is_live(now) and state.owner_id != dead_owner_id:
        raise LeaseHeld(f"{resource_id} is held by a live owner until {state.expires_at}")
    if state is not None and state.is_live(now):
        clear_row(conn, resource_id)
        resources.bump_current(conn, resource_id, f"{_resource_type(conn, resource_id)}"
                               ".lease_taken_over", actor, now,
                               lease_generation=state.generation)


def clear_row(conn: apsw.Connection, resource_id: str) -> None:
    """Free the lease row, keeping its generation (no event: the caller records one)."""
    conn.execute(
        "UPDATE leases SET owner_type = NULL, owner_id = NULL, token_hash = NULL,"
        " acquired_at = NULL, heartbeat_at = NULL, expires_at = NULL WHERE resource_id = ?",
        (resource_id,),
    )


@contextlib.contextmanager
def brief_tenure(
    conn: apsw.Connection,
    resource_id: str,
    owner_type: OwnerType,
    owner_id: str,
    now: int,
    entropy: Entropy,
) -> Iterator[Lease]:
    """Claim, act and release inside one transaction, as one change of the resource (one
    revision, one event): the body's own bump (for example `run.completed`, naming this
    lease's generation) records the whole tenure; a body that bumps nothing gets one
    `<type>.lease_released` with the generation. On an exception nothing is released here:
    the caller's transaction (or savepoint) rolls the claim back with the rest."""
    before = resources.current_revision(conn, resource_id)
    lease = acquire_row(conn, resource_id, owner_type, owner_id, now, entropy)
    yield lease
    clear_row(conn, resource_id)
    if resources.current_revision(conn, resource_id) == before:
        resources.bump_current(
            conn, resource_id, f"{_resource_type(conn, resource_id)}.lease_released",
            lease.actor, now, lease_generation=lease.generation,
        )
