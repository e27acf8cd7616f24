"""A `--once` pass ends when its work is done, or at its bound: settlements its chat's pace
cannot fit in it stay due, unattempted or to be tried again, and the next pass does them
(never lost, never posted twice). A retry edits only the keyboards still on: otherwise a pass
whose slots all go to edits done already would never post an outcome (seen with a 3 s bound:
every pass redid the edits and ran out of slots before the posts). Paced for real: Telegram's
limits apply (one chat)."""

from __future__ import annotations

import time

import pytest

from channels.telegram import poll, reservations
from tests.channels.telegram.test_channel import CHAT, Flow, flow  # noqa: F401

PRESSES = 6  # 12 settlement sends to one chat: about 10 s at Telegram's pace


def outcome_posts(flow: Flow) -> list[int]:  # noqa: F811
    """The reply_to card of each outcome post sent (posts carry no keyboard)."""
    return [int(m.get("reply_parameters", {}).get("message_id", 0) or 0)
            for m in flow.sends() if "reply_markup" not in m]


def test_a_settlement_not_finished_in_a_once_pass_is_done_by_the_next(
        flow: Flow, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    handles = [flow.ask(title=f"Step {n}?") for n in range(PRESSES)]
    flow.poll()  # the cards, paced: 6 to one chat
    while len(flow.server.sent_messages(CHAT)) < PRESSES:
        flow.poll()
    cards = {int(m["message_id"]) for m in flow.server.sent_messages(CHAT)}
    for handle, card in zip(handles, sorted(cards), strict=True):
        flow.press(handle, "continue", message_id=card)
    monkeypatch.setattr(poll, "ONCE_DEADLINE_SECONDS", 3)
    start = time.monotonic()
    report = flow.poll()
    took = time.monotonic() - start
    # The pass ended at its bound, not after the chat's pace let every settlement out.
    assert took < 3 + 2, took
    assert report.processed == PRESSES
    assert all(flow.view(h).status == "accepted" for h in handles)  # every press counted
    statuses = flow.effect_statuses(reservations.SETTLE)
    assert len(statuses) == PRESSES
    assert "pending" in statuses, statuses  # some did not fit: left due, not lost
    assert set(statuses) <= {"pending", "applied"}, statuses  # none ambiguous or given up
    first = len(outcome_posts(flow))
    assert first < PRESSES
    for _ in range(10):  # the next passes (cron's next minutes) settle the rest
        if set(flow.effect_statuses(reservations.SETTLE)) == {"applied"}:
            break
        flow.db.clock.offset_ms += 60_000  # type: ignore[attr-defined]  # past any retry time
        flow.poll()
    assert flow.effect_statuses(reservations.SETTLE) == ["applied"] * PRESSES
    assert len(outcome_posts(flow)) == PRESSES  # each posted once
    edited = [int(r.params["message_id"]) for r in flow.server.requests("editMessageReplyMarkup")]
    assert set(edited) == cards
