"""Presses are answered at once: a batch's callback answers go out concurrently (bounded) right
after the batch commits, before any delivery of the pass.

No timings are asserted: the fake Bot API delays every answer, and its request log (when each
request arrived and was answered) shows how many were in flight together and what came first.
"""

from __future__ import annotations

from pathlib import Path

from adapters.telegram.fake import FakeBotApi, Fault, RecordedRequest
from channels.telegram.poll import ANSWER_CONCURRENCY
from state.database import Database
from tests.channels.telegram.helpers import (
    TOKEN,
    USER,
    button_data,
    configure_telegram_profile,
    delivery_texts,
    effect_statuses,
    inbox_results,
    message_parts,
    open_decision,
    poll_in_process,
)

PRESSES = 100


def max_in_flight(requests: list[RecordedRequest]) -> int:
    """The most requests of the log that were being answered at the same moment."""
    edges = sorted([(r.started_at, 1) for r in requests]
                   + [(r.ended_at or float("inf"), -1) for r in requests],
                   key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


def test_a_batch_of_presses_is_answered_concurrently_before_any_delivery(home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            pressed = open_decision(db, title="Pressed?")
            poll_in_process(db)  # delivered
            ref = int(message_parts(pressed.decision_id)[-1].message_ref or 0)
            fresh = open_decision(db, title="Fresh?")  # due for delivery in the next pass
            for i in range(PRESSES):
                fake.push_fixture("callback_press.json", {
                    "user_id": USER, "chat_id": USER, "message_id": ref, "message_text": "x",
                    "callback_query_id": f"cb-{i}",
                    "callback_data": button_data(pressed, "continue" if i % 2 else "stop")})
            fake.inject("answerCallbackQuery", Fault.delay(0.15, times=PRESSES))
            poll_in_process(db)
        answers = fake.requests("answerCallbackQuery")
        assert sorted(str(r.params["callback_query_id"]) for r in answers) == \
            sorted(f"cb-{i}" for i in range(PRESSES))
        assert all(r.status == 200 for r in answers)
        # Concurrent, and bounded.
        assert 2 <= max_in_flight(answers) <= ANSWER_CONCURRENCY
        # Right after the batch: every answer was on its way before the fresh decision's
        # delivery left, and before the pressed decision's outcome was posted.
        [fresh_text] = delivery_texts(fresh)
        [delivery] = [r for r in fake.requests("sendMessage") if r.params["text"] == fresh_text]
        assert max(r.started_at for r in answers) < delivery.started_at
        assert max(r.ended_at or 0 for r in answers) <= delivery.started_at
    results = [r for _, _, r in inbox_results()]
    assert results.count("won") == 1 and results.count("already_resolved") == PRESSES - 1
    assert effect_statuses(pressed.decision_id, "telegram.settle") == ["applied"]
    assert effect_statuses(fresh.decision_id, "telegram.deliver") == ["applied"]
