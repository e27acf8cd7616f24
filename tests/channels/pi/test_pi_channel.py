"""The Pi channel's domain steps in one process: answers, deliveries, settlements."""

from __future__ import annotations

from pathlib import Path

import pytest

from channels import inbox, messages, store
from channels.config.loading import load_config
from channels.decisions import records, resolution
from channels.decisions.resolution import HumanAnswer
from channels.decisions.workflows import AskHandle
from channels.pi import answers, deliveries, sessions, settle_view
from channels.pi.answers import AnswerEvent
from state import leases
from state.clock import ManualClock
from state.database import Database
from state.errors import LeaseHeld, StaleLease, WriteRejected
from state.leases import Lease
from tests.adapters.pi.helpers import SESSION, ask, count, route_to_telegram


def event(handle: AskHandle, choice: str, key: str, entered: object = None, *,
          origin: str = "human", digest: str | None = None) -> AnswerEvent:
    return AnswerEvent(decision_id=handle.decision_id,
                       request_digest=digest or handle.request.request_digest, choice=choice,
                       entered=entered, actor_id="local:1000", event_key=key, origin=origin)


def session_lease(db: Database) -> tuple[Lease, str]:
    channel_id = db.write(lambda c: sessions.register_session(c, SESSION, db.clock.now_ms()))
    lease = db.write(lambda c: store.claim(c, channel_id, "bridge-1", db.clock.now_ms(),
                                           db.entropy))
    return lease, channel_id


def submit(db: Database, lease: Lease, channel_id: str, answer: AnswerEvent
           ) -> answers.AnswerReport:
    config = load_config()
    return db.write(lambda c: answers.submit_answer(c, lease, channel_id, answer,
                                                       db.clock.now_ms(), config))


def test_an_answer_is_one_inbox_row_one_submission_and_the_winner(db: Database) -> None:
    handle = ask(db)
    lease, channel_id = session_lease(db)
    report = submit(db, lease, channel_id, event(handle, "replan", "k1", "less scope"))
    assert (report.result, report.outcome, report.choice, report.label) == (
        "won", "accepted", "replan", "Replan")
    row = db.conn.execute("SELECT event_type, processed_at IS NOT NULL FROM channel_inbox"
                          " WHERE channel_id = ? AND external_event_id = 'k1'",
                          (channel_id,)).fetchone()
    assert tuple(row) == ("answer", 1)
    winner = db.read(lambda c: records.resolution_of(c, handle.decision_id))
    assert winner is not None and winner.response == {
        "choice": "replan", "input": {"text": "less scope"}}
    assert db.conn.execute("SELECT channel, actor_id, idempotency_key FROM"
                           " human_decision_resolutions").fetchone() == ("pi", "local:1000", "k1")
    assert inbox.inbox_result(db.conn, channel_id, "k1")["result"] == "won"


def test_a_repeated_event_replays_the_first_result_and_writes_nothing(db: Database) -> None:
    handle = ask(db)
    lease, channel_id = session_lease(db)
    submit(db, lease, channel_id, event(handle, "continue", "k1"))
    events_before = count(db, "SELECT count(*) FROM events")
    again = submit(db, lease, channel_id, event(handle, "stop", "k1"))
    assert (again.result, again.choice, again.duplicate) == ("won", "continue", True)
    assert count(db, "SELECT count(*) FROM events") == events_before
    assert count(db, "SELECT count(*) FROM human_decision_submissions") == 1


def test_stale_rejected_and_late_answers_are_processed_with_their_reason(db: Database) -> None:
    handle = ask(db)
    lease, channel_id = session_lease(db)
    stale = submit(db, lease, channel_id, event(handle, "continue", "k1", digest="sha256:" + "0" * 64))
    bad = submit(db, lease, channel_id, event(handle, "replan", "k2", "x" * 21))
    unknown = submit(db, lease, channel_id, event(handle, "maybe", "k3"))
    submit(db, lease, channel_id, event(handle, "stop", "k4"))
    late = submit(db, lease, channel_id, event(handle, "continue", "k5"))
    assert stale.result == "stale"
    assert (bad.result, bad.message) == ("rejected",
                                         "Human decision choice replan input length must be 1 through 20")
    assert (unknown.result, unknown.message) == ("rejected",
                                                 'Human decision choice "maybe" is not available')
    assert (late.result, late.outcome, late.label) == ("already_resolved", "accepted", "Stop")
    assert inbox.inbox_counts(db.conn, channel_id) == (0, 5)


def test_an_unknown_decision_is_ignored_but_processed(db: Database) -> None:
    lease, channel_id = session_lease(db)
    bogus = AnswerEvent("decision-" + "0" * 40, "sha256:" + "0" * 64, "continue", None,
                        SESSION, "k1")
    report = submit(db, lease, channel_id, bogus)
    assert (report.result, report.message) == ("ignored", "unknown decision")
    assert inbox.inbox_counts(db.conn, channel_id) == (0, 1)
    assert count(db, "SELECT count(*) FROM human_decision_submissions") == 0


def test_a_non_human_origin_is_recorded_and_rejected(db: Database) -> None:
    handle = ask(db)
    lease, channel_id = session_lease(db)
    report = submit(db, lease, channel_id, event(handle, "continue", "k1", origin="pi:rpc"))
    assert report.result == "rejected"
    assert report.message == resolution.MODEL_ANSWER_MESSAGE
    assert db.read(lambda c: records.resolution_of(c, handle.decision_id)) is None


def test_pi_is_refused_when_the_audience_routes_only_to_telegram(db: Database, home: Path) -> None:
    route_to_telegram(home, pi_too=False)
    handle = ask(db)
    lease, channel_id = session_lease(db)
    report = submit(db, lease, channel_id, event(handle, "continue", "k1"))
    assert (report.result, report.message) == (
        "rejected", "channel pi is not allowed for audience operator")
    assert db.read(lambda c: answers.open_for_pi(c, load_config())) == []


def test_answers_need_the_live_channel_lease(db: Database, clock: ManualClock) -> None:
    handle = ask(db)
    lease, channel_id = session_lease(db)
    clock.advance(leases.TTL_MS + 1)
    with pytest.raises(StaleLease):
        submit(db, lease, channel_id, event(handle, "continue", "k1"))
    assert count(db, "SELECT count(*) FROM channel_inbox") == 0


def test_answer_locally_claims_and_releases_the_local_channel(db: Database) -> None:
    handle = ask(db)
    report = answers.answer_locally(db, event(handle, "continue", "pi:e1"), "me", None)
    assert report.result == "won"
    local = sessions.local_channel_id()
    assert store.channel_row(db.conn, local) == ("pi", "local")
    state = db.read(lambda c: leases.read(c, store.channel_resource(local)))
    assert state is not None and state.owner_type is None and state.generation == 1


def test_answer_locally_waits_then_reports_a_busy_channel(db: Database) -> None:
    handle = ask(db)
    local = sessions.local_channel_id()
    db.write(lambda c: store.ensure_channel(c, local, "pi", "local", db.clock.now_ms()))
    db.write(lambda c: store.claim(c, local, "someone-else", db.clock.now_ms(), db.entropy))
    with pytest.raises(LeaseHeld, match="try again shortly"):
        answers.answer_locally(db, event(handle, "continue", "pi:e1"), "me", None,
                                  wait_seconds=0.2)
    assert count(db, "SELECT count(*) FROM channel_inbox") == 0


def test_deliveries_put_own_runs_first_and_skip_confirmed_ones(db: Database) -> None:
    other = ask(db, "From elsewhere")
    mine = ask(db, "From this session")
    foreign = ask(db, "Asked in another session")
    for handle, session in ((mine, SESSION), (foreign, "another-session")):
        db.write(lambda c, h=handle, s=session: c.execute(
            "INSERT INTO run_bindings (run_id, origin_session_id, execution_mode, created_at)"
            " VALUES (?, ?, 'interactive', 0)", (h.run.run_id, s)))
    lease, channel_id = session_lease(db)
    found = db.read(lambda c: deliveries.undelivered(c, channel_id, SESSION, None))
    # Bound decisions go to their own session only; unbound ones to every session.
    assert [d.decision.decision_id for d in found] == [mine.decision_id, other.decision_id]
    everything = db.read(lambda c: answers.open_for_pi(c, None))
    assert foreign.decision_id in [d.decision_id for d in everything]
    recorded = db.write(lambda c: deliveries.record_deliveries(c, lease, channel_id, found,
                                                               db.clock.now_ms()))
    assert len(recorded) == 2
    cursor = db.write(lambda c: deliveries.confirm_delivery(
        c, lease, channel_id, SESSION, found[0].message_id, "a1b2c3d4", db.clock.now_ms()))
    assert cursor == 1
    assert store.cursor(db.conn, channel_id, deliveries.DELIVERED_CURSOR) == "1"
    message = messages.get_message(db.conn, found[0].message_id)
    assert message is not None
    assert (message.status, message.conversation_ref, message.message_ref) == (
        "confirmed", SESSION, "a1b2c3d4")
    left = db.read(lambda c: deliveries.undelivered(c, channel_id, SESSION, None))
    assert [d.decision.decision_id for d in left] == [other.decision_id]


def test_confirming_a_foreign_message_is_refused(db: Database) -> None:
    lease, channel_id = session_lease(db)
    with pytest.raises(WriteRejected, match="not a delivery"):
        db.write(lambda c: deliveries.confirm_delivery(c, lease, channel_id, SESSION,
                                                       "delivery-nope", "e1", 0))


def test_a_decision_resolved_before_its_row_is_written_is_not_delivered(db: Database) -> None:
    handle = ask(db)
    lease, channel_id = session_lease(db)
    found = db.read(lambda c: deliveries.undelivered(c, channel_id, SESSION, None))
    db.write(lambda c: resolution.resolve(c, HumanAnswer(
        handle.decision_id, handle.request.request_digest, {"choice": "stop"}, "pi", "x", "e",
        "pi:e"), db.clock.now_ms()))
    assert db.write(lambda c: deliveries.record_deliveries(c, lease, channel_id, found,
                                                           db.clock.now_ms())) == []


def test_a_delivered_decision_gets_a_settlement_that_is_applied_once(db: Database) -> None:
    handle = ask(db)
    lease, channel_id = session_lease(db)
    found = db.read(lambda c: deliveries.undelivered(c, channel_id, SESSION, None))
    db.write(lambda c: deliveries.record_deliveries(c, lease, channel_id, found,
                                                    db.clock.now_ms()))
    submit(db, lease, channel_id, event(handle, "stop", "k1"))
    due = db.read(lambda c: settle_view.due_settlements(c, channel_id, db.clock.now_ms()))
    assert [(s.decision_id, s.outcome, s.text.splitlines()[0]) for s in due] == [
        (handle.decision_id, "accepted", "Accepted: Stop")]
    attempt = db.write(lambda c: settle_view.begin_settlement(
        c, lease, channel_id, due[0].effect_id, db.clock.now_ms(), db.entropy))
    effect = db.write(lambda c: settle_view.finish_settlement(c, attempt, True, db.clock.now_ms()))
    assert effect.status.value == "applied"
    assert db.read(lambda c: settle_view.due_settlements(c, channel_id, db.clock.now_ms())) == []


def test_an_unwritten_settlement_is_pending_again_and_a_crashed_one_is_recovered(
        db: Database, clock: ManualClock) -> None:
    handle = ask(db)
    lease, channel_id = session_lease(db)
    found = db.read(lambda c: deliveries.undelivered(c, channel_id, SESSION, None))
    db.write(lambda c: deliveries.record_deliveries(c, lease, channel_id, found, clock.now_ms()))
    submit(db, lease, channel_id, event(handle, "continue", "k1"))
    due = db.read(lambda c: settle_view.due_settlements(c, channel_id, clock.now_ms()))
    attempt = db.write(lambda c: settle_view.begin_settlement(
        c, lease, channel_id, due[0].effect_id, clock.now_ms(), db.entropy))
    db.write(lambda c: settle_view.finish_settlement(c, attempt, False, clock.now_ms()))
    due = db.read(lambda c: settle_view.due_settlements(c, channel_id, clock.now_ms()))
    assert len(due) == 1
    # Now a bridge dies mid-attempt: the next owner makes the settlement due again.
    db.write(lambda c: settle_view.begin_settlement(c, lease, channel_id, due[0].effect_id,
                                                    clock.now_ms(), db.entropy))
    clock.advance(leases.TTL_MS + 1)
    fresh = db.write(lambda c: store.claim(c, channel_id, "bridge-2", clock.now_ms(), db.entropy))
    assert db.write(lambda c: settle_view.recover_settlements(c, fresh, channel_id,
                                                              clock.now_ms())) == 1
    assert len(db.read(lambda c: settle_view.due_settlements(c, channel_id, clock.now_ms()))) == 1
