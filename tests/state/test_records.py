"""Transaction and ownership tests for blobs, resources, events, leases and effects."""

from __future__ import annotations

import threading
from pathlib import Path

import apsw
import pytest

from state import blobs, effects, leases, resources
from state.canonical import canonical_bytes, sha256
from state.clock import ManualClock
from state.database import Database
from state.errors import (
    BlobMismatch,
    DatabaseBusy,
    EffectConflict,
    LeaseHeld,
    StaleLease,
    StaleRevision,
    WriteRejected,
)
from state.resources import SYSTEM, Actor

HOST = Actor("host", "host-1")


def count(db: Database, table: str) -> int:
    return int(db.conn.execute(f"SELECT count(*) FROM {table}").get)


def events_of(db: Database, resource_id: str) -> list[tuple[int, str]]:
    return [(int(r), str(t)) for r, t in db.conn.execute(
        "SELECT resource_revision, event_type FROM events WHERE resource_id = ?"
        " ORDER BY resource_revision", (resource_id,))]


def make_resource(db: Database, rid: str = "run:r1", kind: str = "run") -> None:
    db.write(lambda c: resources.create(c, rid, kind, SYSTEM, db.clock.now_ms()))  # type: ignore[arg-type]


# -- blobs -------------------------------------------------------------------------------------


def test_identical_blob_is_adopted_and_hash_is_sha256_of_canonical_bytes(db: Database) -> None:
    value = {"b": 1, "a": [1.0, "x"]}
    h1 = db.write(lambda c: blobs.put_json(c, value, 1))
    h2 = db.write(lambda c: blobs.put_json(c, {"a": [1, "x"], "b": 1}, 2))
    assert h1 == h2 == sha256(b'{"a":[1,"x"],"b":1}') == sha256(canonical_bytes(value))
    assert count(db, "blobs") == 1
    assert db.read(lambda c: blobs.get_json(c, h1)) == {"a": [1, "x"], "b": 1}


def test_blob_with_same_hash_but_other_media_type_is_rejected(db: Database) -> None:
    db.write(lambda c: blobs.put_bytes(c, b"hello", "text/plain", 1))
    with pytest.raises(BlobMismatch):
        db.write(lambda c: blobs.put_bytes(c, b"hello", "application/json", 1))


def test_a_blob_row_whose_length_disagrees_with_its_content_cannot_exist(db: Database) -> None:
    with pytest.raises(apsw.ConstraintError):
        db.write(lambda c: c.execute(
            "INSERT INTO blobs VALUES (?, 'text/plain', 4, x'0001', 0)", (sha256(b"\0\1"),)))


def test_tampered_blob_bytes_are_detected_on_adoption(db: Database) -> None:
    h = db.write(lambda c: blobs.put_text(c, "original", 1))
    db.conn.execute("UPDATE blobs SET content = CAST('forgery!' AS BLOB) WHERE blob_hash = ?", (h,))
    with pytest.raises(BlobMismatch):
        db.write(lambda c: blobs.put_text(c, "original", 2))


def test_text_is_stored_as_text_plain_and_text_of_the_earlier_long_type_is_adopted(
        db: Database) -> None:
    new = db.write(lambda c: blobs.put_text(c, "new text", 1))
    assert db.conn.execute("SELECT media_type FROM blobs WHERE blob_hash = ?",
                           (new,)).get == "text/plain"
    # A database an earlier version wrote: the same text under the long media type.
    old = db.write(lambda c: blobs.put_bytes(c, b"old text", "text/plain; charset=utf-8", 1))
    assert db.write(lambda c: blobs.put_text(c, "old text", 2)) == old
    assert db.read(lambda c: blobs.get_text(c, old)) == "old text"
    assert count(db, "blobs") == 2
    with pytest.raises(BlobMismatch):  # the long type is text only: JSON still differs
        db.write(lambda c: blobs.put_bytes(c, b"old text", "application/json", 3))


# -- resources and events ----------------------------------------------------------------------


def test_one_revision_and_one_event_per_accepted_command(db: Database) -> None:
    make_resource(db)
    db.write(lambda c: resources.bump(c, "run:r1", 1, "run.started", HOST, 5, payload={"x": 1}))
    assert db.conn.execute("SELECT revision FROM resources WHERE resource_id='run:r1'").get == 2
    assert events_of(db, "run:r1") == [(1, "run.created"), (2, "run.started")]


def test_stale_expected_revision_writes_nothing(db: Database) -> None:
    make_resource(db)
    before = count(db, "events"), count(db, "blobs")
    with pytest.raises(StaleRevision, match="is at revision 1, not 0"):
        db.write(lambda c: resources.bump(c, "run:r1", 0, "run.started", HOST, 5,
                                          payload={"new": "blob"}))
    assert (count(db, "events"), count(db, "blobs")) == before


def test_a_command_changing_two_resources_bumps_each_once_or_neither(db: Database) -> None:
    make_resource(db, "run:a")
    make_resource(db, "decision:d", "decision")

    def both(c: apsw.Connection, expected_b: int) -> None:
        resources.bump(c, "run:a", 1, "run.resumed", HOST, 9)
        resources.bump(c, "decision:d", expected_b, "decision.resolved", HOST, 9)

    with pytest.raises(StaleRevision):
        db.write(lambda c: both(c, 7))
    assert events_of(db, "run:a") == [(1, "run.created")]  # the first bump rolled back too
    db.write(lambda c: both(c, 1))
    assert events_of(db, "run:a")[-1] == (2, "run.resumed")
    assert events_of(db, "decision:d")[-1] == (2, "decision.resolved")


def test_duplicate_event_revisions_are_impossible(db: Database) -> None:
    make_resource(db)
    with pytest.raises(apsw.ConstraintError):
        db.write(lambda c: c.execute(
            "INSERT INTO events (event_id, resource_id, resource_revision, event_type, actor_type,"
            " recorded_at) VALUES ('dup', 'run:r1', 1, 'run.created', 'system', 0)"))


def test_any_exception_rolls_back_the_whole_command(db: Database) -> None:
    def failing(c: apsw.Connection) -> None:
        c.execute("INSERT INTO projects VALUES ('p', '/p', 1)")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        db.write(failing)
    assert count(db, "projects") == 0
    assert db.conn.txn_state() == apsw.SQLITE_TXN_NONE


# -- leases ------------------------------------------------------------------------------------


def test_claim_renew_release_keeps_generation_and_stores_only_the_token_hash(
    db: Database, clock: ManualClock
) -> None:
    make_resource(db, "channel:c", "channel")
    now = clock.now_ms()
    lease = db.write(lambda c: leases.claim(c, "channel:c", "channel", "me", now, db.entropy))
    assert lease.generation == 1 and lease.expires_at == now + 60_000
    stored = db.conn.execute("SELECT token_hash FROM leases").get
    assert stored == sha256(lease.token.encode()) and lease.token.encode() not in stored
    assert lease.token not in repr(lease)
    # More than 20 s left: renewal writes nothing.
    assert db.write(lambda c: lease.renew(c, now + 39_000)) == lease
    renewed = db.write(lambda c: lease.renew(c, now + 40_000))
    assert renewed.expires_at == now + 100_000 and renewed.generation == 1
    db.write(lambda c: renewed.release(c, now + 41_000))
    row = db.conn.execute("SELECT generation, owner_type, token_hash, expires_at FROM leases").fetchone()
    assert row == (1, None, None, None)
    again = db.write(lambda c: leases.claim(c, "channel:c", "channel", "me", now + 42_000, db.entropy))
    assert again.generation == 2
    assert [t for _, t in events_of(db, "channel:c")] == [
        "channel.created", "channel.lease_acquired", "channel.lease_released",
        "channel.lease_acquired"]


def test_a_live_lease_cannot_be_claimed_but_an_expired_one_can(
    db: Database, clock: ManualClock
) -> None:
    make_resource(db, "channel:c", "channel")
    t0 = clock.now_ms()
    first = db.write(lambda c: leases.claim(c, "channel:c", "channel", "a", t0, db.entropy))
    with pytest.raises(LeaseHeld):
        db.write(lambda c: leases.claim(c, "channel:c", "channel", "b", t0 + 59_999, db.entropy))
    second = db.write(lambda c: leases.claim(c, "channel:c", "channel", "b", t0 + 60_000, db.entropy))
    assert second.generation == first.generation + 1
    # The old owner's handoff: its writes are now rejected.
    with pytest.raises(StaleLease):
        db.write(lambda c: first.verify(c, t0 + 60_001))
    with pytest.raises(StaleLease):
        db.write(lambda c: first.renew(c, t0 + 60_001))
    with pytest.raises(StaleLease):
        db.write(lambda c: first.release(c, t0 + 60_001))


@pytest.mark.parametrize("field", ["token", "generation", "owner_id"])
def test_a_forged_or_stale_lease_value_cannot_write(
    db: Database, clock: ManualClock, field: str
) -> None:
    make_resource(db, "channel:c", "channel")
    now = clock.now_ms()
    lease = db.write(lambda c: leases.claim(c, "channel:c", "channel", "me", now, db.entropy))
    forged = {
        "token": leases.Lease(lease.resource_id, "channel", "me", lease.generation,
                              lease.expires_at, "forged-token"),
        "generation": leases.Lease(lease.resource_id, "channel", "me", lease.generation + 1,
                                   lease.expires_at, lease.token),
        "owner_id": leases.Lease(lease.resource_id, "channel", "other", lease.generation,
                                 lease.expires_at, lease.token),
    }[field]
    with pytest.raises(StaleLease):
        db.write(lambda c: forged.verify(c, now + 1))


def test_an_expired_lease_cannot_write(db: Database, clock: ManualClock) -> None:
    make_resource(db, "channel:c", "channel")
    now = clock.now_ms()
    lease = db.write(lambda c: leases.claim(c, "channel:c", "channel", "me", now, db.entropy))
    with pytest.raises(StaleLease, match="expired"):
        db.write(lambda c: lease.verify(c, now + 60_000))


def test_lease_generation_can_never_go_down(db: Database) -> None:
    make_resource(db, "channel:c", "channel")
    db.write(lambda c: leases.claim(c, "channel:c", "channel", "me", 1, db.entropy))
    with pytest.raises(apsw.ConstraintError, match="cannot decrease"):
        db.conn.execute("UPDATE leases SET generation = 0")


# -- effects -----------------------------------------------------------------------------------


def reserve(db: Database, payload: object, key: str = "k") -> effects.Reservation:
    return db.write(lambda c: effects.reserve(
        c, source_resource_id="run:r1", source_revision=1, effect_type="telegram.deliver",
        idempotency_key=key, payload=payload, owner_scope="channel", actor=HOST, now=10))


def test_effects_appear_in_the_source_transaction_or_not_at_all(db: Database) -> None:
    make_resource(db)

    def cause(c: apsw.Connection, fail: bool) -> None:
        resources.bump(c, "run:r1", 1, "run.waiting", HOST, 5)
        effects.reserve(c, source_resource_id="run:r1", source_revision=2,
                        effect_type="run.continue", idempotency_key="d1", payload={"a": 1},
                        owner_scope="run", actor=HOST, now=5)
        if fail:
            raise RuntimeError("crash before commit")

    with pytest.raises(RuntimeError):
        db.write(lambda c: cause(c, True))
    assert count(db, "effects") == 0
    db.write(lambda c: cause(c, False))
    assert count(db, "effects") == 1


def test_identical_reservation_adopts_and_a_different_payload_conflicts(db: Database) -> None:
    make_resource(db)
    first = reserve(db, {"chat": 1})
    again = reserve(db, {"chat": 1})
    assert first.effect_id == again.effect_id and not first.adopted and again.adopted
    with pytest.raises(EffectConflict):
        reserve(db, {"chat": 2})
    assert count(db, "effects") == 1


def test_an_effect_reserved_under_an_earlier_longer_id_is_found_by_its_cause(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    make_resource(db)
    # An earlier version named effects with 40 hex digits: its effects are adopted (and
    # conflict) by their unique key, never duplicated under the new, shorter id.
    monkeypatch.setattr(effects, "effect_id_for", lambda s, t, k: "effect-" + "a" * 40)
    old = reserve(db, {"chat": 1})
    monkeypatch.undo()
    again = reserve(db, {"chat": 1})
    assert again.adopted and again.effect_id == old.effect_id == "effect-" + "a" * 40
    found = db.read(lambda c: effects.find(c, "run:r1", "telegram.deliver", "k"))
    assert found is not None and found.effect_id == old.effect_id
    with pytest.raises(EffectConflict):
        reserve(db, {"chat": 2})
    fresh = reserve(db, {"chat": 1}, key="k2")
    assert len(fresh.effect_id) == len("e") + 16  # 96 bits, 6 a character
    assert count(db, "effects") == 2


def test_effect_attempt_lifecycle_applied(db: Database, clock: ManualClock) -> None:
    make_resource(db)
    res = reserve(db, {"chat": 1})
    now = clock.now_ms()
    assert [e.effect_id for e in db.read(lambda c: effects.list_due(c, ["telegram.deliver"], now))] \
        == [res.effect_id]
    attempt = db.write(lambda c: effects.get(c, res.effect_id).begin_attempt(
        c, "channel", "w1", now, db.entropy))
    assert attempt.effect.status is effects.EffectStatus.APPLYING
    assert db.read(lambda c: effects.list_due(c, ["telegram.deliver"], now)) == []
    done = db.write(lambda c: attempt.finish(c, "applied", now + 1,
                                             result={"ok": True}, external_ref="m1"))
    assert done.status is effects.EffectStatus.APPLIED and done.settled_at == now + 1
    assert db.conn.execute("SELECT outcome FROM effect_attempts").fetchall() == [("applied",)]
    assert db.conn.execute("SELECT owner_type FROM leases WHERE resource_id = ?",
                           (done.resource_id,)).get is None
    types = [t for _, t in events_of(db, done.resource_id)]
    assert types == ["effect.reserved", "effect.attempt_started", "effect.applied"]


def test_a_provably_unsent_attempt_is_rescheduled_not_settled(
    db: Database, clock: ManualClock
) -> None:
    make_resource(db)
    res = reserve(db, {"chat": 1})
    now = clock.now_ms()
    attempt = db.write(lambda c: effects.get(c, res.effect_id).begin_attempt(
        c, "channel", "w", now, db.entropy))
    effect = db.write(lambda c: attempt.finish(c, "rejected", now,
                                               error={"outcome": "not_sent"},
                                               retry_at=now + 5000))
    assert effect.status is effects.EffectStatus.PENDING and effect.next_attempt_at == now + 5000
    assert db.read(lambda c: effects.list_due(c, ["telegram.deliver"], now + 4999)) == []
    assert len(db.read(lambda c: effects.list_due(c, ["telegram.deliver"], now + 5000))) == 1
    with pytest.raises(WriteRejected):
        attempt2 = db.write(lambda c: effects.get(c, res.effect_id).begin_attempt(
            c, "channel", "w", now + 5000, db.entropy))
        db.write(lambda c: attempt2.finish(c, "ambiguous", now, retry_at=now))


def test_an_abandoned_attempt_becomes_interrupted_and_ambiguous(
    db: Database, clock: ManualClock
) -> None:
    make_resource(db)
    res = reserve(db, {"chat": 1})
    now = clock.now_ms()
    attempt = db.write(lambda c: effects.get(c, res.effect_id).begin_attempt(
        c, "channel", "dead", now, db.entropy))
    assert db.read(lambda c: effects.abandoned(c, ["telegram.deliver"], now + 1)) == []
    stale = db.read(lambda c: effects.abandoned(c, ["telegram.deliver"], now + 60_000))
    assert [e.effect_id for e in stale] == [res.effect_id]
    effect = db.write(lambda c: stale[0].interrupt(c, HOST, now + 60_000,
                                                   provably_unsent=False))
    assert effect.status is effects.EffectStatus.AMBIGUOUS
    assert db.conn.execute("SELECT outcome FROM effect_attempts").fetchall() == [("interrupted",)]
    # The dead owner's late result is refused: its lease is gone.
    with pytest.raises(StaleLease):
        db.write(lambda c: attempt.finish(c, "applied", now + 60_001))


def test_a_pending_effect_can_be_cancelled_once(db: Database) -> None:
    make_resource(db)
    res = reserve(db, {"chat": 1})
    effect = db.read(lambda c: effects.get(c, res.effect_id))
    cancelled = db.write(lambda c: effect.cancel(c, HOST, 20, "decision resolved"))
    assert cancelled.status is effects.EffectStatus.CANCELLED
    with pytest.raises(WriteRejected):
        db.write(lambda c: cancelled.cancel(c, HOST, 21, "again"))


# -- busy handling -----------------------------------------------------------------------------


def test_a_writer_locked_out_past_the_busy_timeout_gets_a_clear_busy_error(
    home: Path, db: Database
) -> None:
    other = Database.open_writer()
    other.conn.execute("BEGIN IMMEDIATE")
    db.busy_attempts = 1
    db.conn.set_busy_timeout(200)  # keep the test short; production uses 5000 ms
    try:
        with pytest.raises(DatabaseBusy, match="stayed locked by another writer"):
            db.write(lambda c: c.execute("INSERT INTO projects VALUES ('p', '/p', 1)"))
    finally:
        other.conn.execute("ROLLBACK")
        other.close()
    assert count(db, "projects") == 0


def test_a_busy_lock_released_during_the_retry_lets_the_command_through(
    home: Path, db: Database
) -> None:
    other = Database.open_writer()
    other.conn.execute("BEGIN IMMEDIATE")
    db.conn.set_busy_timeout(100)
    db.busy_attempts = 20
    timer = threading.Timer(0.3, lambda: other.conn.execute("ROLLBACK"))
    timer.start()
    try:
        db.write(lambda c: c.execute("INSERT INTO projects VALUES ('p', '/p', 1)"))
    finally:
        timer.join()
        other.close()
    assert count(db, "projects") == 1


def test_a_write_permit_is_evidence_checked_again_not_authority(
    db: Database, clock: ManualClock
) -> None:
    make_resource(db, "run:p", "run")
    now = clock.now_ms()
    lease = db.write(lambda c: leases.claim(c, "run:p", "host", "me", now, db.entropy))
    good = leases.WritePermit("run:p", "run.finish", lease.actor, 2, lease)
    db.write(lambda c: good.check(c, now + 1))
    stale_revision = leases.WritePermit("run:p", "run.finish", lease.actor, 1, lease)
    with pytest.raises(StaleRevision, match=r"run\.finish"):
        db.write(lambda c: stale_revision.check(c, now + 1))
    wrong_resource = leases.WritePermit("run:other", "run.finish", lease.actor, None, lease)
    with pytest.raises(StaleLease):
        db.write(lambda c: wrong_resource.check(c, now + 1))
    with pytest.raises(StaleLease, match="expired"):
        db.write(lambda c: good.check(c, now + 60_000))


def test_an_effect_recorded_by_its_source_change_starts_at_revision_0(db: Database) -> None:
    make_resource(db)

    def cause(c: apsw.Connection) -> effects.Reservation:
        revision = resources.bump(c, "run:r1", 1, "run.waiting", HOST, 5)
        return effects.reserve(c, source_resource_id="run:r1", source_revision=revision,
                               effect_type="run.continue", idempotency_key="d1",
                               payload={"a": 1}, owner_scope="run", actor=HOST, now=5,
                               recorded_by_source=True)

    res = db.write(cause)
    resource_id = f"effect:{res.effect_id}"
    # The source's event (revision 2, same transaction) records the cause; the effect row and
    # its resource are there, at revision 0 and without an event of their own.
    assert events_of(db, "run:r1") == [(1, "run.created"), (2, "run.waiting")]
    assert db.conn.execute("SELECT resource_type, revision FROM resources WHERE resource_id = ?",
                           (resource_id,)).fetchall() == [("effect", 0)]
    assert db.conn.execute("SELECT source_revision, status FROM effects").fetchall() == [
        (2, "pending")]
    assert events_of(db, resource_id) == []
    attempt = db.write(lambda c: effects.get(c, res.effect_id).begin_attempt(
        c, "host", "w", 6, db.entropy))
    db.write(lambda c: attempt.finish(c, "applied", 7))
    assert events_of(db, resource_id) == [(1, "effect.attempt_started"), (2, "effect.applied")]


def test_an_effect_cannot_claim_a_source_change_that_is_not_its_revision(db: Database) -> None:
    make_resource(db)
    with pytest.raises(WriteRejected):
        db.write(lambda c: effects.reserve(
            c, source_resource_id="run:r1", source_revision=2, effect_type="run.continue",
            idempotency_key="d1", payload={}, owner_scope="run", actor=HOST, now=5,
            recorded_by_source=True))
    assert count(db, "effects") == 0 and count(db, "resources") == 1


def test_a_brief_tenure_is_one_change_of_the_resource(db: Database) -> None:
    make_resource(db)

    def finish(c: apsw.Connection) -> int:
        with leases.brief_tenure(c, "run:r1", "host", "h", 5, db.entropy) as lease:
            resources.bump_current(c, "run:r1", "run.completed", lease.actor, 5,
                                   lease_generation=lease.generation)
        return lease.generation

    assert db.write(finish) == 1
    # One event (the body's), naming the generation; the lease is free, its generation kept.
    assert db.conn.execute("SELECT resource_revision, event_type, lease_generation FROM events"
                           " WHERE resource_id = 'run:r1'").fetchall() == [
        (1, "run.created", None), (2, "run.completed", 1)]
    assert db.read(lambda c: leases.read(c, "run:r1")) == leases.LeaseState(
        "run:r1", 1, None, None, None)

    def idle(c: apsw.Connection) -> None:
        with leases.brief_tenure(c, "run:r1", "host", "h", 6, db.entropy):
            pass

    db.write(idle)  # a tenure that changed nothing else: one release event, generation 2
    assert events_of(db, "run:r1")[-1] == (3, "run.lease_released")
    assert db.read(lambda c: leases.read(c, "run:r1")).generation == 2  # type: ignore[union-attr]

    def failing(c: apsw.Connection) -> None:
        with leases.brief_tenure(c, "run:r1", "host", "h", 7, db.entropy):
            raise WriteRejected("the body failed")

    with pytest.raises(WriteRejected):
        db.write(failing)
    assert db.read(lambda c: leases.read(c, "run:r1")).generation == 2  # type: ignore[union-attr]
    assert len(events_of(db, "run:r1")) == 3


def test_a_brief_tenure_refuses_a_live_owner(db: Database) -> None:
    make_resource(db)
    db.write(lambda c: leases.claim(c, "run:r1", "host", "other", 5, db.entropy))
    with pytest.raises(LeaseHeld):
        db.write(lambda c: leases.brief_tenure(c, "run:r1", "host", "h", 6,
                                               db.entropy).__enter__())
    assert [t for _, t in events_of(db, "run:r1")] == ["run.created", "run.lease_acquired"]
