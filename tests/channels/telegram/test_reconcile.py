"""A press on a message of ours that we never learned is reconciled (issue 12).

The send's response was lost (the fake sends the message, then drops the connection), so the
part is an intent without references. A later press carries the chat and message id: they
are recorded, and the message is settled like any other (keyboard removed, outcome posted),
even when the decision was settled before the press arrived.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.telegram.fake import FakeBotApi, Fault
from channels.decisions.workflows import AskHandle
from tests.channels.telegram.helpers import (
    PROFILE,
    TOKEN,
    USER,
    configure_telegram_profile,
    delivery_texts,
    effect_statuses,
    inbox_results,
    live_buttons,
    message_parts,
    open_decision_now,
    outcome_count,
    press_button,
    run_cli,
    send_count,
)

SETTLE = "telegram.settle"


@dataclass
class Bot:
    home: Path
    fake: FakeBotApi

    def poll(self, expect: int = 0) -> str:
        result = run_cli(self.home, "poll", "--once")
        assert result.returncode == expect, result.stderr
        return result.stderr

    def keyboard(self, message_id: int) -> list[Any]:
        [message] = [m for m in self.fake.sent_messages(USER) if m["message_id"] == message_id]
        return list((message.get("reply_markup") or {}).get("inline_keyboard") or [])

    def edits(self) -> list[int]:
        return [int(r.params["message_id"]) for r in self.fake.requests("editMessageReplyMarkup")
                if r.status == 200]


@pytest.fixture
def bot(home: Path) -> Iterator[Bot]:
    with FakeBotApi(TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        yield Bot(home, fake)


def _lost_delivery(bot: Bot) -> tuple[AskHandle, int]:
    """A decision whose only part was sent, but whose send response was lost."""
    handle = open_decision_now()
    bot.fake.inject("sendMessage", Fault.lose())
    assert "may not have arrived" in bot.poll(expect=75)  # cron hears of the ambiguity
    [part] = message_parts(handle.decision_id)
    assert part.message_ref is None  # an intent: ambiguous
    [message] = bot.fake.sent_messages(USER)
    return handle, int(message["message_id"])


def test_a_press_on_a_message_whose_send_response_was_lost_resolves_and_settles_it(
    bot: Bot,
) -> None:
    handle, lost = _lost_delivery(bot)
    press = press_button(bot.fake, handle, "continue", lost)
    bot.poll()
    assert inbox_results() == [(press, "callback", "won")]
    [part] = message_parts(handle.decision_id)
    assert (part.conversation_ref, part.message_ref) == (str(USER), str(lost))
    assert bot.edits() == [lost] and live_buttons(bot.keyboard(lost)) == []
    assert outcome_count(bot.fake, "Continue") == 1


def test_a_press_after_the_decision_was_settled_still_removes_that_keyboard(bot: Bot) -> None:
    handle, lost = _lost_delivery(bot)
    assert run_cli(bot.home, "cancel", handle.decision_id).returncode == 0
    bot.poll()  # settlement runs, but knows no message of this decision
    assert effect_statuses(handle.decision_id, SETTLE) == ["applied"]
    assert bot.edits() == [] and bot.keyboard(lost) != []

    press = press_button(bot.fake, handle, "continue", lost)
    bot.poll()
    [(update_id, kind, result)] = inbox_results()
    assert (update_id, kind, result) == (press, "callback", "already_resolved")
    [part] = message_parts(handle.decision_id)
    assert part.message_ref == str(lost)
    assert effect_statuses(handle.decision_id, SETTLE) == ["applied", "applied"]
    assert bot.edits() == [lost] and live_buttons(bot.keyboard(lost)) == []
    [outcome] = [t for t in (str(r.params["text"]) for r in bot.fake.requests("sendMessage"))
                 if t.startswith("Cancelled")]
    assert send_count(bot.fake, outcome) == 1

    press_button(bot.fake, handle, "continue", lost)  # a second press learns nothing new
    bot.poll()
    assert effect_statuses(handle.decision_id, SETTLE) == ["applied", "applied"]
    assert bot.edits() == [lost]


def test_a_press_on_the_lost_copy_of_a_resent_delivery_removes_both_keyboards(bot: Bot) -> None:
    handle, lost = _lost_delivery(bot)
    resent = run_cli(bot.home, "resend", handle.decision_id, "--profile", PROFILE)
    assert resent.returncode == 0, resent.stderr
    [text] = delivery_texts(handle)
    assert send_count(bot.fake, text) == 2
    [part] = message_parts(handle.decision_id)
    copy = int(part.message_ref or 0)
    assert copy != lost

    press = press_button(bot.fake, handle, "stop", lost)
    bot.poll()
    assert inbox_results() == [(press, "callback", "won")]
    assert sorted(bot.edits()) == sorted([lost, copy])
    assert live_buttons(bot.keyboard(lost)) == [] and live_buttons(bot.keyboard(copy)) == []
    assert outcome_count(bot.fake, "Stop") == 1  # one per recipient
