"""Ambiguity stays where it happened (issue 18, item 4): one chat's part whose answer was lost
never holds up the other chats, and the line names the chat to check; an outcome post whose
answer was lost is ambiguous (never confirmed, never posted twice) and `status` lists it.
Real `piw-channels poll` children against the loopback fake Bot API.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.telegram.fake import FakeBotApi, Fault
from tests.channels.telegram.helpers import (
    PROFILE,
    TOKEN,
    USER,
    configure_telegram_profile,
    effect_statuses,
    message_parts,
    open_decision_now,
    press_button,
)
from tests.cli import piw

OTHER = 5987654321  # a second private chat


@pytest.fixture
def fake(home: Path) -> Iterator[FakeBotApi]:
    with FakeBotApi(token=TOKEN) as server:
        configure_telegram_profile(home, server.base_url, user_ids=(USER, OTHER),
                                   chat_ids=(USER, OTHER))
        yield server


def test_one_chats_lost_answer_never_holds_up_the_other_chat(
    home: Path, fake: FakeBotApi,
) -> None:
    handle = open_decision_now()
    fake.inject("sendMessage", Fault.drop())  # the first chat's send: its answer is lost
    done = piw(home, "poll", "--once")
    assert done.returncode == 75, done.stderr
    [line] = done.stderr.splitlines()
    assert f"may not have arrived in chat {USER} (" in line and "check that chat" in line
    assert str(OTHER) not in line
    # The other chat got its part, confirmed; the first stays an intent (never re-sent).
    parts = {p.recipient: p.message_ref for p in message_parts(handle.decision_id)}
    assert parts[0] is None and parts[1] is not None
    assert [str(r.params["chat_id"]) for r in fake.requests("sendMessage")] == [
        str(USER), str(OTHER)]
    assert piw(home, "poll", "--once").returncode == 75  # nothing sent twice
    assert len(fake.requests("sendMessage")) == 2


def test_an_outcome_post_whose_answer_was_lost_is_ambiguous_and_listed(
    home: Path, fake: FakeBotApi,
) -> None:
    handle = open_decision_now()
    assert piw(home, "poll", "--once").returncode == 0
    message = int(str(message_parts(handle.decision_id)[-1].message_ref))
    press_button(fake, handle, "continue", message)
    fake.inject("sendMessage", Fault.lose())  # the first outcome post arrives, its answer not
    done = piw(home, "poll", "--once")
    assert effect_statuses(handle.decision_id, "telegram.settle") == ["ambiguous"]
    assert done.returncode == 75, done.stderr
    assert f"chat {USER}" in done.stderr and "outcome post" in done.stderr
    status = piw(home, "status", "--json")
    assert status.returncode == 75
    [item] = json.loads(status.stdout)["needs_attention"]
    assert (item["kind"], item["decision_id"], item["profile"]) == (
        "ambiguous_effect", handle.decision_id, PROFILE)
    posts = [r for r in fake.requests("sendMessage") if r.params.get("reply_markup") is None]
    assert piw(home, "poll", "--once").returncode in (0, 75)
    again = [r for r in fake.requests("sendMessage") if r.params.get("reply_markup") is None]
    assert len(again) == len(posts)  # never posted twice
