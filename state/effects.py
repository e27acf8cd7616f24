"""The transactional outbox: effects reserved with their cause, applied under their own lease.

Outcomes: `applied`; `rejected` (the provider said no); `ambiguous` (the provider may have
acted: never repeated blindly); `interrupted` (an attempt found unfinished after its owner
died). An attempt that provably did nothing may reschedule the effect instead of settling it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import apsw

from state import blobs, leases, resources
from state.canonical import JsonValue
from state.clock import Entropy
from state.errors import EffectConflict, WriteRejected
from state.ids import digest_id
from state.leases import Lease, OwnerType
from state.resources import Actor, ResourceType

__all__ = [
    "Attempt", "AttemptOutcome", "Effect", "EffectStatus", "OwnerScope", "Reservation",
    "abandoned", "effect_id_for", "find", "find_scoped", "get", "list_due",
    "list_for_source", "reserve", "scoped_key",
]


class OwnerScope(StrEnum):
    """Whose work an effect is (the DDL's `effects.owner_scope` CHECK set)."""

    RUN = "run"
    CONTROLLER = "controller"
    CHANNEL = "channel"
    SYSTEM = "system"


class EffectStatus(StrEnum):
    """Closed set of effect states; an unknown stored value raises."""

    PENDING = "pending"
    APPLYING = "applying"
    APPLIED = "applied"
    REJECTED = "rejected"
    AMBIGUOUS = "ambiguous"
    CANCELLED = "cancelled"

    @property
    def settled(self) -> bool:
        return self not in (EffectStatus.PENDING, EffectStatus.APPLYING)


class AttemptOutcome(StrEnum):
    """How an effect attempt ended (the DDL's `effect_attempts.outcome` CHECK set).
    `interrupted` is written only by a takeover (see `Effect.interrupt`), never passed in."""

    APPLIED = "applied"
    REJECTED = "rejected"
    AMBIGUOUS = "ambiguous"
    INTERRUPTED = "interrupted"

_COLUMNS = (
    "effect_id, resource_id, source_resource_id, source_revision, effect_type, idempotency_key,"
    " payload_hash, owner_scope, status, attempt_count, next_attempt_at, external_ref,"
    " created_at, settled_at"
)


@dataclass(frozen=True, slots=True)
class Effect:
    """One outbox row."""

    effect_id: str
    resource_id: str
    source_resource_id: str
    source_revision: int
    effect_type: str
    idempotency_key: str
    payload_hash: bytes
    owner_scope: OwnerScope
    status: EffectStatus
    attempt_count: int
    next_attempt_at: int | None
    external_ref: str | None
    created_at: int
    settled_at: int | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Effect:
        values = list(row)
        values[7] = OwnerScope(values[7])
        values[8] = EffectStatus(values[8])
        return cls(*values)

    def payload(self, conn: apsw.Connection) -> Any:
        """The effect's request document."""
        return blobs.get_json(conn, self.payload_hash)

    def result(self, conn: apsw.Connection) -> Any:
        """The recorded result document (None when it has none)."""
        return _document(conn, self.effect_id, "result_hash")

    def error(self, conn: apsw.Connection) -> Any:
        """The recorded error document (None when it has none)."""
        return _document(conn, self.effect_id, "error_hash")

    def begin_attempt(self, conn: apsw.Connection, owner_type: OwnerType, owner_id: str,
                      now: int, entropy: Entropy) -> Attempt:
        """Claim the effect's lease, record a new attempt and mark the effect applying (the
        row is read again: this value may come from an earlier transaction)."""
        effect = get(conn, self.effect_id)
        effect._require_pending()
        lease = leases.acquire_row(conn, self.resource_id, owner_type, owner_id, now, entropy)
        number = effect.attempt_count + 1
        conn.execute(
            "UPDATE effects SET status = 'applying', attempt_count = :n, updated_at = :now"
            " WHERE effect_id = :id",
            {"n": number, "now": now, "id": self.effect_id},
        )
        conn.execute(
            "INSERT INTO effect_attempts (effect_id, attempt_number, owner_id, lease_generation,"
            " started_at) VALUES (?, ?, ?, ?, ?)",
            (self.effect_id, number, owner_id, lease.generation, now),
        )
        # No event payload: the attempt's number and owner are its `effect_attempts` row, and
        # the event names the claim's generation (a payload would be a blob reference per event).
        resources.bump_current(
            conn, self.resource_id, "effect.attempt_started", lease.actor, now,
            lease_generation=lease.generation,
        )
        return Attempt(get(conn, self.effect_id), number, lease)

    def apply_locally(
        self, conn: apsw.Connection, lease: Lease, now: int, *, result: JsonValue = None
    ) -> Effect:
        """Apply a local effect in the caller's transaction: the attempt, its result and the
        settlement commit together, so it happens exactly once. `lease` (for example the run
        owner's) authorises it and is re-verified here."""
        lease.verify(conn, now)
        self._require_pending()
        result_hash = None if result is None else blobs.put_json(conn, result, now)
        number = self.attempt_count + 1
        conn.execute(
            "INSERT INTO effect_attempts (effect_id, attempt_number, owner_id, lease_generation,"
            " started_at, finished_at, outcome, result_hash)"
            " VALUES (?, ?, ?, ?, ?, ?, 'applied', ?)",
            (self.effect_id, number, lease.owner_id, lease.generation, now, now, result_hash),
        )
        conn.execute(
            "UPDATE effects SET status = 'applied', attempt_count = :n, result_hash = :result,"
            " updated_at = :now, settled_at = :now WHERE effect_id = :id",
            {"n": number, "result": result_hash, "now": now, "id": self.effect_id},
        )
        resources.bump_current(conn, self.resource_id, "effect.applied", lease.actor, now,
                               lease_generation=lease.generation)
        return get(conn, self.effect_id)

    def interrupt(self, conn: apsw.Connection, actor: Actor, now: int, *,
                  provably_unsent: bool, owner_gone: bool = False) -> Effect:
        """Close an abandoned attempt as `interrupted`; the effect becomes ambiguous unless the
        caller can prove nothing was sent, in which case it is pending again. `owner_gone`:
        the caller knows the process of a live-looking lease is gone, so its lease is freed."""
        state = leases.read(conn, self.resource_id)
        if owner_gone and state is not None and state.is_live(now):
            leases.clear_row(conn, self.resource_id)
            state = None
        if self.status is not EffectStatus.APPLYING or (state is not None and state.is_live(now)):
            raise WriteRejected(f"{self.effect_id} is not an abandoned attempt")
        conn.execute(
            "UPDATE effect_attempts SET finished_at = :now, outcome = 'interrupted'"
            " WHERE effect_id = :id AND outcome IS NULL",
            {"now": now, "id": self.effect_id},
        )
        status = "pending" if provably_unsent else "ambiguous"
        conn.execute(
            "UPDATE effects SET status = :status, updated_at = :now,"
            " settled_at = CASE WHEN :status = 'pending' THEN NULL ELSE :now END"
            " WHERE effect_id = :id",
            {"status": status, "now": now, "id": self.effect_id},
        )
        leases.clear_row(conn, self.resource_id)
        resources.bump_current(
            conn, self.resource_id, "effect.interrupted", actor, now, payload={"status": status},
        )
        return get(conn, self.effect_id)

    def defer(self, conn: apsw.Connection, at: int, now: int) -> None:
        """Move a pending effect's next attempt time (no attempt is recorded: nothing was
        tried). A coalesced send waits for its slot so, without an attempt row for each look."""
        conn.execute(
            "UPDATE effects SET next_attempt_at = :at, updated_at = :now"
            " WHERE effect_id = :id AND status = 'pending'",
            {"at": at, "now": now, "id": self.effect_id},
        )

    def cancel(self, conn: apsw.Connection, actor: Actor, now: int, reason: str) -> Effect:
        """Cancel a pending effect that is no longer wanted (its cause was superseded)."""
        self._require_pending()
        conn.execute(
            "UPDATE effects SET status = 'cancelled', updated_at = :now, settled_at = :now"
            " WHERE effect_id = :id",
            {"now": now, "id": self.effect_id},
        )
        resources.bump_current(
            conn, self.resource_id, "effect.cancelled", actor, now, payload={"reason": reason}
        )
        return get(conn, self.effect_id)

    def _require_pending(self) -> None:
        if self.status is not EffectStatus.PENDING:
            raise WriteRejected(f"{self.effect_id} is {self.status.value}, not pending")


def _document(conn: apsw.Connection, effect_id: str, column: str) -> Any:
    """A recorded result or error document of an effect (None when it has none)."""
    value = conn.execute(f"SELECT {column} FROM effects WHERE effect_id = ?", (effect_id,)).get
    return None if value is None else blobs.get_json(conn, bytes(value))


@dataclass(frozen=True, slots=True)
class Reservation:
    """Result of `reserve`: the effect id and whether an identical effect was adopted."""

    effect_id: str
    adopted: bool


@dataclass(frozen=True, slots=True)
class Attempt:
    """An attempt in progress, with the effect lease that authorises finishing it."""

    effect: Effect
    attempt_number: int
    lease: Lease

    def renew(self, conn: apsw.Connection, now: int) -> Attempt:
        """Keep a long attempt's lease alive (multi-part sends, rate-limit waits)."""
        return Attempt(self.effect, self.attempt_number, self.lease.renew(conn, now))

    def finish(
        self,
        conn: apsw.Connection,
        outcome: AttemptOutcome,
        now: int,
        *,
        result: JsonValue = None,
        error: JsonValue = None,
        external_ref: str | None = None,
        retry_at: int | None = None,
    ) -> Effect:
        """Record the outcome and settle the effect (or, for a provably unsent try,
        reschedule it)."""
        self.lease.verify(conn, now)
        if outcome == AttemptOutcome.INTERRUPTED:
            raise WriteRejected("only a takeover interrupts an attempt (see `Effect.interrupt`)")
        if retry_at is not None and outcome != AttemptOutcome.REJECTED:
            raise WriteRejected("only an attempt that provably did nothing may be retried")
        result_hash = None if result is None else blobs.put_json(conn, result, now)
        error_hash = None if error is None else blobs.put_json(conn, error, now)
        effect_id = self.effect.effect_id
        conn.execute(
            "UPDATE effect_attempts SET finished_at = :now, outcome = :outcome,"
            " result_hash = :result, error_hash = :error"
            " WHERE effect_id = :id AND attempt_number = :n",
            {"now": now, "outcome": outcome, "result": result_hash, "error": error_hash,
             "id": effect_id, "n": self.attempt_number},
        )
        status = "pending" if retry_at is not None else outcome
        conn.execute(
            "UPDATE effects SET status = :status, next_attempt_at = :retry, result_hash = :result,"
            " error_hash = :error, external_ref = coalesce(:ref, external_ref), updated_at = :now,"
            " settled_at = CASE WHEN :status = 'pending' THEN NULL ELSE :now END"
            " WHERE effect_id = :id",
            {"status": status, "retry": retry_at, "result": result_hash, "error": error_hash,
             "ref": external_ref, "now": now, "id": effect_id},
        )
        leases.clear_row(conn, self.effect.resource_id)
        event = "effect.retry_scheduled" if retry_at is not None else f"effect.{outcome}"
        resources.bump_current(
            conn, self.effect.resource_id, event, self.lease.actor, now,
            lease_generation=self.lease.generation,
        )
        return get(conn, effect_id)


def effect_id_for(source_resource_id: str, effect_type: str, idempotency_key: str) -> str:
    """Deterministic id: the same cause always names the same effect. 96 bits in 16
    characters after an `e` (an id is stored about a dozen times per effect, and its resource
    id `effect:<id>` a dozen more: its row, resource, events, lease, attempts and their
    indexes); a cause is found by its unique key (`find`), never by recomputing the id, so
    effects reserved under the longer ids of earlier versions (`effect-<hex>`) are found too."""
    return "e" + digest_id(f"{source_resource_id}\0{effect_type}\0{idempotency_key}")


def reserve(
    conn: apsw.Connection,
    *,
    source_resource_id: str,
    source_revision: int | None = None,
    effect_type: str,
    idempotency_key: str,
    payload: JsonValue,
    owner_scope: OwnerScope,
    actor: Actor,
    now: int,
    available_at: int | None = None,
    recorded_by_source: bool = False,
    recorded_by_caller: bool = False,
) -> Reservation:
    """Reserve an effect in the caller's transaction; adopt an identical one.

    `recorded_by_source`: the caller has just moved the source to `source_revision` in this
    transaction, so that change's event records the effect's cause and the effect resource
    starts at revision 0 without an event of its own (one event fewer per follow-up).
    `recorded_by_caller`: the caller records the reservation in this transaction, in its
    change of another resource (a channel's one event for the deliveries a pass reserves,
    naming them); the effect starts at revision 0 as above.
    Otherwise the reservation is the effect's first change: `effect.reserved`, revision 1.
    `source_revision` defaults to the source's current one (0 before its first change)."""
    if source_revision is None:
        source_revision = resources.current_revision(conn, source_resource_id) or 0
    payload_hash = blobs.put_json(conn, payload, now)
    existing = find(conn, source_resource_id, effect_type, idempotency_key)
    if existing is not None:
        if existing.payload_hash != payload_hash:
            raise EffectConflict(
                f"{effect_type} {idempotency_key!r} of {source_resource_id} already exists"
                " with a different payload"
            )
        return Reservation(existing.effect_id, adopted=True)
    effect_id = effect_id_for(source_resource_id, effect_type, idempotency_key)
    resource_id = f"effect:{effect_id}"
    if recorded_by_source and resources.current_revision(conn, source_resource_id) \
            != source_revision:
        raise WriteRejected(f"{source_resource_id} is not at revision {source_revision}:"
                            " its change cannot record this effect")
    if recorded_by_source or recorded_by_caller:
        resources.create_follow_up(conn, resource_id, ResourceType.EFFECT, now)
    else:
        resources.create(conn, resource_id, ResourceType.EFFECT, actor, now,
                         event_type="effect.reserved")
    conn.execute(
        "INSERT INTO effects (effect_id, resource_id, source_resource_id, source_revision,"
        " effect_type, idempotency_key, payload_hash, owner_scope, status, attempt_count,"
        " next_attempt_at, created_at, updated_at)"
        " VALUES (:id, :resource, :source, :revision, :type, :key, :payload, :scope, 'pending', 0,"
        " :available, :now, :now)",
        {
            "id": effect_id, "resource": resource_id, "source": source_resource_id,
            "revision": source_revision, "type": effect_type, "key": idempotency_key,
            "payload": payload_hash, "scope": owner_scope, "available": available_at, "now": now,
        },
    )
    return Reservation(effect_id, adopted=False)


def get(conn: apsw.Connection, effect_id: str) -> Effect:
    """Load one effect; KeyError when absent."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM effects WHERE effect_id = ?", (effect_id,))
    found = row.fetchone()
    if found is None:
        raise KeyError(effect_id)
    return Effect.from_row(found)


def find(conn: apsw.Connection, source_resource_id: str, effect_type: str,
         idempotency_key: str) -> Effect | None:
    """The effect of this cause (its unique key), or None when none was reserved."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM effects WHERE source_resource_id = ? AND effect_type = ?"
        " AND idempotency_key = ?", (source_resource_id, effect_type, idempotency_key),
    ).fetchone()
    return None if row is None else Effect.from_row(row)


def scoped_key(scope: str) -> str:
    """The short key of a scope's own effect of a cause (a channel's delivery and settlement
    of a decision: one each, so the scope alone keys them): 60 bits of the scope in 10
    characters after a `~`, instead of the scope itself (a channel id is 49 characters,
    stored in the effect's row and its unique index). Earlier versions keyed them by the
    scope itself; both forms are in the scope (`find_scoped`, `list_due`)."""
    return "~" + digest_id(scope, 10)


def find_scoped(conn: apsw.Connection, source_resource_id: str, effect_type: str,
                scope: str) -> Effect | None:
    """The scope's own effect of this cause (keyed `scoped_key(scope)`, or by the scope
    itself in a database an earlier version wrote), or None."""
    return find(conn, source_resource_id, effect_type, scoped_key(scope)) or \
        find(conn, source_resource_id, effect_type, scope)


_SCOPE = (
    " AND (:scope IS NULL OR idempotency_key IN (:scope, :short)"
    " OR substr(idempotency_key, 1, length(:scope) + 1) = :scope || ':')"
)


def _scope(scope: str | None) -> dict[str, str | None]:
    return {"scope": scope, "short": None if scope is None else scoped_key(scope)}


# The condition of the partial index `effects_unsettled`, word for word: SQLite uses a partial
# index only for a query whose WHERE clause contains it, and `status = 'pending'` alone does
# not (it does not reason that it implies the IN list). Without it every pass scans all effects.
_UNSETTLED = "status IN ('pending', 'applying')"


def _types(effect_types: Sequence[str]) -> tuple[str, dict[str, str]]:
    names = {f"t{i}": t for i, t in enumerate(effect_types)}
    return ",".join(f":{n}" for n in names), names


def list_due(
    conn: apsw.Connection, effect_types: Sequence[str], now: int, *, scope: str | None = None
) -> list[Effect]:
    """Pending effects of these types whose next attempt time has come, oldest first.

    `scope` keeps only effects whose idempotency key is the scope's (its short key, the scope
    itself or `scope:...`: channel effects are keyed by their channel).
    """
    marks, names = _types(effect_types)
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM effects WHERE {_UNSETTLED} AND status = 'pending'"
        f" AND effect_type IN ({marks})"
        f" AND (next_attempt_at IS NULL OR next_attempt_at <= :now){_SCOPE}"
        " ORDER BY created_at, effect_id",
        {**names, "now": now, **_scope(scope)},
    )
    return [Effect.from_row(r) for r in rows]


def _next_due_at(
    conn: apsw.Connection, effect_types: Sequence[str], *, scope: str | None = None
) -> int | None:
    """When the earliest pending effect of these types is due (0: at any time, it has no
    retry time), or None when none is pending; through the partial index, as `list_due`."""
    marks, names = _types(effect_types)
    value = conn.execute(
        f"SELECT min(coalesce(next_attempt_at, 0)) FROM effects WHERE {_UNSETTLED}"
        f" AND status = 'pending' AND effect_type IN ({marks}){_SCOPE}",
        {**names, **_scope(scope)},
    ).get
    return None if value is None else int(value)


def list_for_source(
    conn: apsw.Connection, source_resource_id: str, effect_type: str, *,
    scope: str | None = None,
) -> list[Effect]:
    """Every effect of one type that a resource caused, oldest first (`scope`: as `list_due`)."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM effects WHERE source_resource_id = :source"
        f" AND effect_type = :type{_SCOPE} ORDER BY created_at, rowid",
        {"source": source_resource_id, "type": effect_type, **_scope(scope)},
    )
    return [Effect.from_row(r) for r in rows]


def _list_applying(
    conn: apsw.Connection, effect_types: Sequence[str], *, scope: str | None = None
) -> list[Effect]:
    """Effects of these types with an attempt in progress (live or abandoned)."""
    marks, names = _types(effect_types)
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM effects WHERE {_UNSETTLED} AND status = 'applying'"
        f" AND effect_type IN ({marks})"
        f"{_SCOPE} ORDER BY created_at, effect_id",
        {**names, **_scope(scope)},
    )
    return [Effect.from_row(r) for r in rows]


def abandoned(
    conn: apsw.Connection, effect_types: Sequence[str], now: int, *, scope: str | None = None
) -> list[Effect]:
    """Applying effects whose owner is gone (lease free or expired)."""
    found = []
    for effect in _list_applying(conn, effect_types, scope=scope):
        state = leases.read(conn, effect.resource_id)
        if state is None or not state.is_live(now):
            found.append(effect)
    return found
