"""Deferred turns: reserved by the winning resolution for runs bound to a Pi session, once."""

from __future__ import annotations

import pytest

from channels import store
from channels.decisions import turn_intents, views, workflows
from channels.decisions.resolution import HumanAnswer, resolve
from channels.decisions.workflows import AskHandle, AskSpec
from channels.pi import sessions, turns
from state.clock import ManualClock
from state.database import Database
from tests.adapters.pi.helpers import CHOICES, SESSION, count


def bound_ask(db: Database, *, session: str | None = SESSION, timeout_ms: int | None = None,
              default: str | None = None) -> AskHandle:
    spec = AskSpec(title="Deploy?", presentation=workflows.presentation_for("Deploy?", None, None),
                   choices=CHOICES, timeout_ms=timeout_ms, default_choice=default,
                   origin_session_id=session)
    handle = workflows.create_ask(db, spec, "owner-1")
    workflows.release_run(db, handle.run.lease)
    return handle


def answer(db: Database, handle: AskHandle, response: dict[str, object], key: str,
           channel: str = "pi") -> str:
    verdict = db.write(lambda c: resolve(c, HumanAnswer(
        handle.decision_id, handle.request.request_digest, response, channel, "local:1000", key,
        key), db.clock.now_ms(), allowed_channels=("pi", "telegram:default")))
    return verdict.result.value


def test_the_winning_answer_reserves_one_turn_for_the_origin_session(db: Database) -> None:
    handle = bound_ask(db)
    assert answer(db, handle, {"choice": "replan", "input": {"text": "  keep  spaces "}},
                  "k1") == "won"
    assert answer(db, handle, {"choice": "stop"}, "k2") == "already_resolved"
    [due] = db.read(lambda c: turn_intents.due_turns(c, SESSION, db.clock.now_ms()))
    fingerprint = db.read(lambda c: views.fingerprint_of(c, handle.decision_id))
    assert due.by_person
    assert due.turn_intent_id == turn_intents.turn_intent_id_for(handle.decision_id)
    assert due.content.splitlines() == [
        f'[piw-channels] Answer to your question "Deploy?" (decision {fingerprint}):',
        "Outcome: accepted (answered)",
        "Choice: replan (Replan)",
        'Text input (exact JSON): {"text": "  keep  spaces "}',
        "Answered by: a person through the pi channel",  # never who: local:1000 is private
        "Continue the task with this answer.",
    ]
    assert "local:1000" not in due.content
    assert db.read(lambda c: turn_intents.due_turns(c, "another-session", db.clock.now_ms())) == []
    assert count(db, "SELECT count(*) FROM turn_intents") == 1


def test_an_unbound_decision_gets_no_turn(db: Database) -> None:
    handle = bound_ask(db, session=None)
    assert answer(db, handle, {"choice": "continue"}, "k1") == "won"
    assert count(db, "SELECT count(*) FROM turn_intents") == 0


def test_a_timeout_default_and_a_cancellation_are_told_as_such(db: Database,
                                                               clock: ManualClock) -> None:
    timed = bound_ask(db, timeout_ms=60_000, default="stop")
    clock.advance(61_000)
    workflows.expire_overdue(db, "expirer")
    cancelled = bound_ask(db)
    workflows.cancel_decision(db, cancelled.decision_id, "withdrawn", "control-1")
    texts = {t.decision_id: t.content
             for t in db.read(lambda c: turn_intents.due_turns(c, SESSION, clock.now_ms()))}
    assert "Outcome: accepted (timed out; the default was taken)" in texts[timed.decision_id]
    assert "Decided by: the timeout; nobody answered" in texts[timed.decision_id]
    assert texts[cancelled.decision_id].splitlines()[1:] == [
        "Outcome: cancelled (withdrawn); no answer will come",
        "Cancelled by: a cancellation (piw-channels cancel or the run's owner), not by a"
        " person's answer",
        "Continue the task without this answer."]
    assert "person answered" not in texts[timed.decision_id]
    assert "control-1" not in texts[cancelled.decision_id]  # owner ids stay private


def test_the_receipt_settles_the_turn_once_and_only_for_its_session(db: Database) -> None:
    handle = bound_ask(db)
    answer(db, handle, {"choice": "continue"}, "k1")
    channel_id = db.write(lambda c: sessions.register_session(c, SESSION, db.clock.now_ms()))
    lease = db.write(lambda c: store.claim(c, channel_id, "bridge-1", db.clock.now_ms(),
                                           db.entropy))
    turn_id = turn_intents.turn_intent_id_for(handle.decision_id)
    with pytest.raises(KeyError):
        db.write(lambda c: turns.confirm_turn(c, lease, channel_id, "another-session", turn_id,
                                              "a1b2c3d4", db.clock.now_ms()))
    assert db.write(lambda c: turns.confirm_turn(c, lease, channel_id, SESSION, turn_id,
                                                 "a1b2c3d4", db.clock.now_ms())) is True
    assert db.write(lambda c: turns.confirm_turn(c, lease, channel_id, SESSION, turn_id,
                                                 "ffffffff", db.clock.now_ms())) is False
    assert db.read(lambda c: turn_intents.turn_entry(c, turn_id)) == "a1b2c3d4"
    assert db.read(lambda c: turn_intents.due_turns(c, SESSION, db.clock.now_ms())) == []
