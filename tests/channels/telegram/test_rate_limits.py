"""Within Telegram's limits: a 429 holds its chat for `retry_after`, for every method and
across passes (kept in the channel's cursor row), nothing is sent into it, and a settlement
outlasts long holds and transient errors until its keyboards are off.

The real poll cycle against the loopback fake Bot API; the database's clock is moved forward
(a child's through the test-only offset) to pass a hold. No timings are asserted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adapters.telegram.fake import FakeBotApi, Fault
from state.database import Database
from tests.channels.telegram.helpers import (
    TOKEN,
    USER,
    attempt_outcomes,
    configure_telegram_profile,
    db_rows,
    db_value,
    delivery_texts,
    effect_statuses,
    live_keyboards,
    message_parts,
    open_decision,
    open_decision_now,
    poll_in_process,
    press_button,
    send_count,
)
from tests.cli import piw
from tests.shifted_clock import ShiftedClock

DELIVER, SETTLE = "telegram.deliver", "telegram.settle"


def holds_row() -> dict[str, Any]:
    value = db_value("SELECT cursor_value FROM channel_cursors WHERE cursor_key = ?",
                     "telegram_holds")
    return {} if value is None else dict(json.loads(value))


def advance(db: Database, ms: int) -> None:
    """Move the database's clock forward (holds, retry times and leases all follow it)."""
    assert isinstance(db.clock, ShiftedClock)
    db.clock.offset_ms += ms


def next_attempt_in(decision_id: str, effect_type: str) -> int:
    return int(db_value("SELECT next_attempt_at - updated_at FROM effects"
                        " WHERE source_resource_id = ? AND effect_type = ?",
                        f"decision:{decision_id}", effect_type))


def test_a_429_holds_its_chat_for_every_pending_delivery_and_across_passes(home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer(clock=ShiftedClock(0)) as db:
            handles = [open_decision(db, title=f"Plan {i}?") for i in range(3)]
            fake.inject("sendMessage", Fault.too_many_requests(30))
            poll_in_process(db)
            # One request into the 429; the other deliveries were not even attempted.
            assert [r.status for r in fake.requests("sendMessage")] == [429]
            [tried] = [h for h in handles if attempt_outcomes(h.decision_id, DELIVER)]
            assert sum(len(attempt_outcomes(h.decision_id, DELIVER)) for h in handles) == 1
            assert all(effect_statuses(h.decision_id, DELIVER) == ["pending"] for h in handles)
            assert 29_000 <= next_attempt_in(tried.decision_id, DELIVER) <= 30_000
            hold = holds_row()[str(USER)]
            assert 29_000 <= hold["until"] - hold["since"] <= 30_000

            poll_in_process(db)  # a new pass: the stored hold still holds the chat
            assert len(fake.requests("sendMessage")) == 1

            advance(db, 31_000)
            poll_in_process(db)
        assert [r.status for r in fake.requests("sendMessage")] == [429, 200, 200, 200]
        for h in handles:
            assert effect_statuses(h.decision_id, DELIVER) == ["applied"]
            [text] = delivery_texts(h)
            assert send_count(fake, text) == (2 if h is tried else 1)  # the 429 sent nothing


def test_a_settlement_outlasts_long_retry_afters_and_transient_errors_for_every_method(
    home: Path,
) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer(clock=ShiftedClock(0)) as db:
            handle = open_decision(db)
            poll_in_process(db)  # delivered
            ref = int(message_parts(handle.decision_id)[-1].message_ref or 0)
            press_button(fake, handle, "continue", ref)
            fake.inject("editMessageReplyMarkup", Fault.too_many_requests(3_000))
            poll_in_process(db)
            # The press was answered (no chat's hold stops that); the keyboard edit hit the
            # 429, and the outcome post to the same chat was held with it: never sent.
            assert [r.status for r in fake.requests("answerCallbackQuery")] == [200]
            assert [r.status for r in fake.requests("editMessageReplyMarkup")] == [429]
            assert len(fake.requests("sendMessage")) == 1  # the delivery only
            assert effect_statuses(handle.decision_id, SETTLE) == ["pending"]
            assert 2_999_000 <= next_attempt_in(handle.decision_id, SETTLE) <= 3_000_000
            poll_in_process(db)  # a new pass within the hold: nothing goes to that chat
            assert len(fake.requests("editMessageReplyMarkup")) == 1

            advance(db, 3_001_000)
            # More than the three attempts a settlement used to get: a 429 again, a server
            # error, a dropped connection; each is tried again, never given up.
            for fault in (Fault.too_many_requests(30), Fault.error(502, "Bad Gateway"),
                          Fault.drop()):
                fake.inject("editMessageReplyMarkup", fault)
                poll_in_process(db)
                assert effect_statuses(handle.decision_id, SETTLE) == ["pending"]
                advance(db, 11 * 60_000)  # past the hold, or the backoff
            poll_in_process(db)
        assert effect_statuses(handle.decision_id, SETTLE) == ["applied"]
        assert attempt_outcomes(handle.decision_id, SETTLE) == [
            "rejected", "rejected", "rejected", "rejected", "applied"]
        assert [r.status for r in fake.requests("editMessageReplyMarkup")] == [
            429, 429, 502, None, 200]
        assert live_keyboards(fake.keyboards()) == []  # settled in the end: none answers
        # and the outcome was posted once (after the delivery), in reply to the card
        assert [r.status for r in fake.requests("sendMessage")] == [200, 200]


def _poll(home: Path, *args: str, offset_ms: int = 0) -> tuple[int, list[str]]:
    done = piw(home, "poll", *args, offset_ms=offset_ms)
    return done.returncode, done.stderr.splitlines()


def test_a_retry_after_over_an_hour_ends_the_pass_with_75_and_holds_across_passes(
    home: Path,
) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        handle = open_decision_now()
        [text] = delivery_texts(handle)
        fake.inject("sendMessage", Fault.too_many_requests(7_200))
        code, lines = _poll(home, "--for", "30")
        assert code == 75
        [line] = lines
        assert line.startswith("Error: telegram:ops: the Bot API asked to wait 2 h (429"
                               f" retry_after) before sending to chat {USER} again"), line
        # The pass ended instead of polling on through its window: it hung up on the long poll
        # under way (the updates it would bring wait, unconfirmed) rather than wait it out.
        assert [r.status for r in fake.requests("getUpdates") if r.params["timeout"] != "0"] \
            in ([], [None])
        assert holds_row()[str(USER)]["until"] - holds_row()[str(USER)]["since"] == 7_200_000

        assert _poll(home, "--once", offset_ms=10 * 60_000) == (75, [])  # said within the hour
        assert _poll(home, "--once", "-v", offset_ms=20 * 60_000)[1][0].startswith(
            "Still: telegram:ops: the Bot API asked to wait 2 h")
        assert len(fake.requests("sendMessage")) == 1  # nothing sent while it holds

        code, lines = _poll(home, "--once", offset_ms=7_201_000)
        assert code == 0
        assert lines == [f"Recovered: telegram:ops: sending to chat {USER} resumed (held 2 h"
                         " by a 429)"]
        assert send_count(fake, text) == 2  # the 429, then the delivery
        assert effect_statuses(handle.decision_id, DELIVER) == ["applied"]
        assert db_rows("SELECT count(*) FROM effect_attempts") == [(2,)]
