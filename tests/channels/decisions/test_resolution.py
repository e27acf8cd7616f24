"""The single resolution function: every candidate kind, every submission result."""

from __future__ import annotations

import pytest

from channels.decisions import follow_ups, records, resolution, views, workflows
from channels.decisions.errors import DecisionRefused
from channels.decisions.resolution import Cancellation, DeadlinePolicy, Result
from state import effects
from state.clock import ManualClock
from state.database import Database
from state.errors import StaleLease
from state.leases import Lease
from tests.channels.decisions.helpers import answer, ask, rows, submit


def submissions(db: Database) -> list[tuple[str, str]]:
    return [(str(k), str(r)) for k, r in rows(
        db, "SELECT idempotency_key, result FROM human_decision_submissions ORDER BY rowid")]


def resolutions(db: Database) -> list[tuple[str, str]]:
    return [(str(o), str(p)) for o, p in rows(
        db, "SELECT outcome, provenance FROM human_decision_resolutions")]


def test_a_verified_human_answer_wins_and_reserves_one_continuation(db: Database) -> None:
    handle = ask(db)
    outcome = submit(db, answer(handle, {"choice": "continue"}, "k1"))
    assert outcome.result is Result.WON
    assert outcome.resolution is not None and outcome.resolution.choice == "continue"
    assert resolutions(db) == [("accepted", "human")]
    assert submissions(db) == [("k1", "won")]
    assert rows(db, "SELECT effect_type, status FROM effects") == [("run.continue", "pending")]
    # The decision resource got exactly one event for the resolution.
    assert rows(db, "SELECT event_type FROM events WHERE resource_id = ? ORDER BY resource_revision",
                records.decision_resource(handle.decision_id)) == [
        ("decision.opened",), ("decision.resolved",)]


def test_duplicate_answer_with_the_same_key_is_adopted_without_a_second_winner(
    db: Database,
) -> None:
    handle = ask(db)
    first = submit(db, answer(handle, {"choice": "continue"}, "k1"))
    again = submit(db, answer(handle, {"choice": "continue"}, "k1"))
    assert again.result is Result.ADOPTED
    assert again.resolution == first.resolution
    assert len(resolutions(db)) == 1
    assert submissions(db) == [("k1", "won")]


def test_a_reused_key_with_a_different_answer_is_rejected(db: Database) -> None:
    handle = ask(db)
    submit(db, answer(handle, {"choice": "continue"}, "k1"))
    reused = submit(db, answer(handle, {"choice": "stop"}, "k1"))
    assert reused.result is Result.REJECTED
    assert "reused for a different answer" in reused.message
    assert resolutions(db) == [("accepted", "human")]


def test_a_second_answer_after_the_winner_is_already_resolved(db: Database) -> None:
    handle = ask(db)
    submit(db, answer(handle, {"choice": "continue"}, "k1"))
    late = submit(db, answer(handle, {"choice": "stop"}, "k2", actor="local:2"))
    assert late.result is Result.ALREADY_RESOLVED
    assert late.resolution is not None and late.resolution.choice == "continue"
    assert submissions(db) == [("k1", "won"), ("k2", "already_resolved")]
    winner = rows(db, "SELECT resolution_digest FROM human_decision_resolutions")[0][0]
    assert rows(db, "SELECT winner_digest FROM human_decision_submissions WHERE result ="
                " 'already_resolved'") == [(winner,)]


def test_a_stale_request_digest_is_recorded_as_stale(db: Database) -> None:
    handle = ask(db)
    stale = submit(db, answer(handle, {"choice": "continue"}, "k1", digest="sha256:" + "0" * 64))
    assert stale.result is Result.STALE
    assert submissions(db) == [("k1", "stale")]
    assert resolutions(db) == []


def test_a_malformed_digest_is_stale_not_a_crash(db: Database) -> None:
    handle = ask(db)
    assert submit(db, answer(handle, {"choice": "continue"}, "k1", digest="bogus")).result \
        is Result.STALE


def test_an_answer_at_or_after_the_deadline_is_stale(db: Database, clock: ManualClock) -> None:
    handle = ask(db, timeout_ms=60_000, default="continue")
    clock.advance(60_000)
    late = submit(db, answer(handle, {"choice": "stop"}, "k1"))
    assert late.result is Result.STALE and late.message == "Human decision request has expired"
    assert resolutions(db) == []


@pytest.mark.parametrize(
    ("response", "message"),
    [
        ({"choice": "maybe"}, 'Human decision choice "maybe" is not available'),
        ({"choice": "continue", "input": {"text": "x"}}, "does not accept input"),
        ({"choice": "replan"}, "input"),
        ({"choice": "replan", "input": {"text": ""}}, "length must be 1 through 20"),
        ({"choice": "replan", "input": {"text": "x" * 21}}, "length must be 1 through 20"),
        ({"choice": "replan", "input": {"other": "x"}}, "must contain only text"),
        ("continue", ""),
    ],
)
def test_invalid_responses_are_rejected_with_the_rule(
    db: Database, response: object, message: str
) -> None:
    handle = ask(db)
    outcome = submit(db, answer(handle, response, "k1"))
    assert outcome.result is Result.REJECTED
    assert message in outcome.message
    assert submissions(db) == [("k1", "rejected")]
    assert resolutions(db) == []


def test_text_input_is_kept_exactly(db: Database) -> None:
    handle = ask(db)
    text = "  keep  \n spaces é "[:20]
    outcome = submit(db, answer(handle, {"choice": "replan", "input": {"text": text}}, "k1"))
    assert outcome.result is Result.WON
    assert outcome.resolution is not None
    assert outcome.resolution.response == {"choice": "replan", "input": {"text": text}}


def test_a_channel_outside_the_audience_is_rejected(db: Database) -> None:
    handle = ask(db)
    outcome = submit(db, answer(handle, {"choice": "continue"}, "k1", channel="telegram:other"))
    assert outcome.result is Result.REJECTED
    assert "not allowed for audience operator" in outcome.message
    assert resolutions(db) == []


@pytest.mark.parametrize("origin", ["model", "tool"])
def test_an_answer_claiming_a_model_or_tool_origin_is_rejected(db: Database, origin: str) -> None:
    handle = ask(db)
    outcome = submit(db, answer(handle, {"choice": "continue"}, "k1", origin=origin))
    assert outcome.result is Result.REJECTED
    assert "requires a verified human answer" in outcome.message
    assert resolutions(db) == []


def test_timeout_policy_needs_the_deadline_and_the_owner_lease(
    db: Database, clock: ManualClock
) -> None:
    handle = ask(db, timeout_ms=30_000, default="continue")
    lease = handle.run.lease
    clock.advance(29_999)
    with pytest.raises(DecisionRefused, match="not eligible yet"):
        db.write(lambda c: resolution.resolve(c, DeadlinePolicy(handle.decision_id, lease),
                                             clock.now_ms()))
    clock.advance(1)
    forged = Lease(lease.resource_id, "host", "intruder", lease.generation, lease.expires_at,
                   "not-the-token")
    with pytest.raises(StaleLease):
        db.write(lambda c: resolution.resolve(c, DeadlinePolicy(handle.decision_id, forged),
                                             clock.now_ms()))
    assert resolutions(db) == []
    clock.advance(60_000)  # the owner's lease has expired: even the real token is refused
    with pytest.raises(StaleLease, match="expired"):
        db.write(lambda c: resolution.resolve(c, DeadlinePolicy(handle.decision_id, lease),
                                             clock.now_ms()))
    assert resolutions(db) == []


def test_defaulted_deadline_accepts_the_default_as_timeout_policy(
    db: Database, clock: ManualClock
) -> None:
    handle = ask(db, timeout_ms=30_000, default="stop")
    clock.advance(30_000)
    outcome = workflows.apply_deadline(db, handle.decision_id, handle.run.lease)
    assert outcome.result is Result.WON
    assert outcome.resolution is not None
    assert (outcome.resolution.outcome, outcome.resolution.provenance,
            outcome.resolution.choice) == ("accepted", "timeout_policy", "stop")
    assert rows(db, "SELECT channel, actor_id, idempotency_key FROM human_decision_resolutions") \
        == [(None, None, None)]


def test_no_default_deadline_cancels_as_expired(db: Database, clock: ManualClock) -> None:
    handle = ask(db, timeout_ms=30_000)
    clock.advance(30_000)
    outcome = workflows.apply_deadline(db, handle.decision_id, handle.run.lease)
    assert outcome.resolution is not None
    assert (outcome.resolution.outcome, outcome.resolution.provenance,
            outcome.resolution.reason) == ("cancelled", "expired_no_default", "expired")
    later = submit(db, answer(handle, {"choice": "continue"}, "late"))
    assert later.result is Result.ALREADY_RESOLVED  # the recorded expiry answers first
    assert later.message == "Human decision request was expired"


def test_human_first_then_timeout_finds_it_resolved(db: Database, clock: ManualClock) -> None:
    handle = ask(db, timeout_ms=30_000, default="stop")
    clock.advance(29_999)
    submit(db, answer(handle, {"choice": "continue"}, "k1"))
    clock.advance(1)
    outcome = workflows.apply_deadline(db, handle.decision_id, handle.run.lease)
    assert outcome.result is Result.ALREADY_RESOLVED
    assert resolutions(db) == [("accepted", "human")]


def test_cancellation_then_human_answer_is_already_resolved(db: Database) -> None:
    handle = ask(db)
    lease = handle.run.lease
    db.write(lambda c: resolution.resolve(
        c, Cancellation(handle.decision_id, lease, "operator", "cancelled"), db.clock.now_ms()))
    late = submit(db, answer(handle, {"choice": "continue"}, "k1"))
    assert late.result is Result.ALREADY_RESOLVED
    assert late.message == "Human decision request was cancelled"


def test_repeated_identical_cancellation_adopts_and_a_different_one_conflicts(
    db: Database,
) -> None:
    handle = ask(db)
    cancel = Cancellation(handle.decision_id, handle.run.lease, "operator", "not needed")
    first = db.write(lambda c: resolution.resolve(c, cancel, db.clock.now_ms()))
    again = db.write(lambda c: resolution.resolve(c, cancel, db.clock.now_ms()))
    assert (first.result, again.result) == (Result.WON, Result.ADOPTED)
    other = Cancellation(handle.decision_id, handle.run.lease, "operator", "other reason")
    with pytest.raises(DecisionRefused, match="cancellation conflicts"):
        db.write(lambda c: resolution.resolve(c, other, db.clock.now_ms()))
    assert len(resolutions(db)) == 1


def test_an_accepted_decision_cannot_be_cancelled(db: Database) -> None:
    handle = ask(db)
    submit(db, answer(handle, {"choice": "continue"}, "k1"))
    cancel = Cancellation(handle.decision_id, handle.run.lease, "operator", "cancelled")
    with pytest.raises(DecisionRefused, match="cannot be cancelled"):
        db.write(lambda c: resolution.resolve(c, cancel, db.clock.now_ms()))


def test_cancel_command_refuses_while_a_live_owner_holds_the_run(db: Database) -> None:
    handle = ask(db)  # the ask owner still holds the run lease
    from state.errors import LeaseHeld

    with pytest.raises(LeaseHeld):
        workflows.cancel_decision(db, handle.decision_id, "cancelled", "control-1")
    workflows.release_run(db, handle.run.lease)
    outcome = workflows.cancel_decision(db, handle.decision_id, "cancelled", "control-1")
    assert outcome.result is Result.WON
    assert rows(db, "SELECT status FROM runs") == [("cancelled",)]


def test_one_continuation_finishes_the_run_exactly_once(db: Database) -> None:
    handle = ask(db)
    submit(db, answer(handle, {"choice": "replan", "input": {"text": "smaller"}}, "k1"))
    lease = handle.run.lease
    workflows.apply_continuation(db, handle.decision_id, lease)
    workflows.apply_continuation(db, handle.decision_id, lease)  # idempotent
    assert rows(db, "SELECT status FROM runs") == [("completed",)]
    assert rows(db, "SELECT status FROM node_attempts") == [("completed",)]
    assert rows(db, "SELECT effect_type, status, attempt_count FROM effects") == [
        ("run.continue", "applied", 1)]
    assert rows(db, "SELECT count(*) FROM effect_attempts") == [(1,)]
    from channels.decisions.runs import run_output

    # The run's output maps its node to the node's output, the response (the reference's
    # `output[node]`); the attempt's is the response itself, the resolution's own blob.
    response = {"choice": "replan", "input": {"text": "smaller"}}
    assert db.read(lambda c: run_output(c, handle.run.run_id)) == {"decision": response}
    assert rows(db, "SELECT a.output_hash = r.response_hash FROM node_attempts a,"
                    " human_decision_resolutions r") == [(1,)]


def test_a_continuation_reserved_under_an_earlier_key_is_found_and_applied_once(
        db: Database) -> None:
    handle = ask(db)
    # Earlier versions keyed a decision's run.continue by the decision id.
    with pytest.MonkeyPatch.context() as earlier_version:
        earlier_version.setattr(follow_ups, "CONTINUE_KEY", handle.decision_id)
        submit(db, answer(handle, {"choice": "continue"}, "k1"))
    assert db.read(lambda c: views.view(c, handle.decision_id)).continuation == "pending"
    workflows.apply_continuation(db, handle.decision_id, handle.run.lease)
    workflows.apply_continuation(db, handle.decision_id, handle.run.lease)  # idempotent
    assert rows(db, "SELECT idempotency_key, status, attempt_count FROM effects") == [
        (handle.decision_id, "applied", 1)]
    assert rows(db, "SELECT status FROM runs") == [("completed",)]
    assert db.read(lambda c: views.view(c, handle.decision_id)).continuation == "applied"


def test_parent_projection_shows_resolution_before_and_after_continuation(db: Database) -> None:
    handle = ask(db)
    open_view = db.read(lambda c: views.view(c, handle.decision_id))
    assert (open_view.status, open_view.continuation) == ("open", "none")
    submit(db, answer(handle, {"choice": "continue"}, "k1"))
    pending = db.read(lambda c: views.view(c, handle.decision_id))
    assert pending.display_status == "accepted (continuation pending)"
    assert rows(db, "SELECT status FROM runs") == [("waiting",)]  # the run has not moved yet
    assert db.read(lambda c: views.list_views(c)) == []  # never shown as open
    workflows.apply_continuation(db, handle.decision_id, handle.run.lease)
    done = db.read(lambda c: views.view(c, handle.decision_id))
    assert (done.status, done.continuation, done.choice_label) == ("accepted", "applied",
                                                                   "Continue")
    assert done.submissions == {"won": 1}


def test_projection_shows_the_winning_channel_but_no_actor_or_event(db: Database) -> None:
    # The channel's name (as `status` prints it) says where it was decided (issue 9, D10);
    # who answered and the provider's event stay private.
    handle = ask(db)
    submit(db, answer(handle, {"choice": "continue"}, "k1", actor="local:4242"))
    view = db.read(lambda c: views.view(c, handle.decision_id)).to_json()
    text = repr(view)
    assert "local:4242" not in text and "event-k1" not in text
    assert view["decided_by"] == "pi"


def test_stale_presentation_closure_settles_presenting_channels_and_drops_undelivered(
    db: Database,
) -> None:
    handle = ask(db)
    now = db.clock.now_ms()
    resource = records.decision_resource(handle.decision_id)

    def present(c: object) -> None:
        from state import blobs, resources
        from state.resources import SYSTEM

        conn = c  # type: ignore[assignment]
        for cid in ("telegram-a", "telegram-b"):
            resources.create(conn, f"channel:{cid}", "channel", SYSTEM, now)  # type: ignore[arg-type]
            conn.execute("INSERT INTO channels VALUES (?, ?, 'telegram', ?, ?)",  # type: ignore[attr-defined]
                         (cid, f"channel:{cid}", cid, now))
        body = blobs.put_text(conn, "text", now)  # type: ignore[arg-type]
        conn.execute("INSERT INTO channel_messages (message_id, channel_id, decision_id, purpose,"  # type: ignore[attr-defined]
                     " content_hash, status, created_at, updated_at)"
                     " VALUES ('m1', 'telegram-a', ?, 'delivery', ?, 'confirmed', ?, ?)",
                     (handle.decision_id, body, now, now))
        effects.reserve(conn, source_resource_id=resource, source_revision=1,  # type: ignore[arg-type]
                        effect_type="telegram.deliver", idempotency_key="telegram-b",
                        payload={"channelId": "telegram-b"}, owner_scope="channel",
                        actor=SYSTEM, now=now)

    db.write(present)  # type: ignore[arg-type]
    submit(db, answer(handle, {"choice": "stop"}, "k1"))
    assert sorted(rows(db, "SELECT effect_type, idempotency_key, status FROM effects")) == [
        ("run.continue", "resolved", "pending"),
        ("telegram.deliver", "telegram-b", "cancelled"),
        ("telegram.settle", effects.scoped_key("telegram-a"), "pending"),  # the short key
    ]
    payload = db.read(lambda c: effects.get(c, effects.effect_id_for(
        resource, "telegram.settle", effects.scoped_key("telegram-a"))).payload(c))
    # Telegram renders its own outcome post: the request names only what the source (the
    # decision) and the key (the channel) do not, one blob for every decision answered so.
    assert payload == {"outcome": "accepted", "provenance": "human"}


def test_losing_candidates_reserve_no_effects(db: Database) -> None:
    handle = ask(db)
    submit(db, answer(handle, {"choice": "continue"}, "k1"))
    before = rows(db, "SELECT count(*) FROM effects")
    for i in range(3):
        submit(db, answer(handle, {"choice": "stop"}, f"x{i}"))
    assert rows(db, "SELECT count(*) FROM effects") == before


def test_expire_step_settles_overdue_decisions_whose_owner_is_gone(
    db: Database, clock: ManualClock
) -> None:
    with_default = ask(db, timeout_ms=1000, default="continue", release=True)
    without = ask(db, timeout_ms=1000, release=True)
    held = ask(db, timeout_ms=1000)  # its owner is alive and will act itself
    clock.advance(1000)
    report = workflows.expire_overdue(db, "expire-1")
    assert {o.resolution.provenance for o in report.resolved if o.resolution} == {
        "timeout_policy", "expired_no_default"}
    assert report.skipped_live_owner == (held.decision_id,)
    statuses = dict(rows(db, "SELECT run_id, status FROM runs"))
    assert statuses[with_default.run.run_id] == "completed"
    assert statuses[without.run.run_id] == "cancelled"
    assert statuses[held.run.run_id] == "waiting"
    # Nothing is left holding the released runs.
    assert rows(db, "SELECT count(*) FROM leases l JOIN resources r USING (resource_id)"
                " WHERE r.resource_type = 'run' AND l.owner_type IS NOT NULL") == [(1,)]


def test_expire_step_finishes_ask_runs_answered_while_nobody_waited(db: Database) -> None:
    handle = ask(db, release=True)
    submit(db, answer(handle, {"choice": "continue"}, "k1"))
    report = workflows.expire_overdue(db, "expire-1")
    assert report.continued == (handle.decision_id,)
    assert rows(db, "SELECT status FROM runs") == [("completed",)]
