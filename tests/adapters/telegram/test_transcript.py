"""The chat transcript `demo --serve` prints: rendered from what the loopback fake recorded
(requests sent over real HTTP, as the client sends them) and the updates pushed into it."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from adapters.telegram.fake import FakeBotApi, PushedUpdate, RecordedRequest
from adapters.telegram.fake.transcript import (
    Transcript,
    TranscriptFollower,
    in_order,
    readable,
    render,
    shorten,
)
from tests.adapters.telegram.test_fake_api import TOKEN, call

CHAT = 5123456789
TIME = re.compile(r"^\d\d:\d\d:\d\d ")


def units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@pytest.fixture
def fake() -> Iterator[FakeBotApi]:
    with FakeBotApi(TOKEN) as server:
        yield server


def send(fake: FakeBotApi, **params: Any) -> int:
    status, body = call(fake.base_url, "sendMessage", {"chat_id": CHAT, **params})
    assert status == 200, body
    return int(body["result"]["message_id"])


def transcript(fake: FakeBotApi) -> list[str]:
    """The transcript without the clock at the start of each event's line."""
    return [TIME.sub("", line) for line in render(in_order(fake.requests(),
                                                           fake.pushed_updates()))]


def test_a_card_shows_its_entities_buttons_and_how_it_was_sent(fake: FakeBotApi) -> None:
    title = "Ship 🚀 release 2.0? «שלום»"
    body = f"{title}\nRun this first:\ngit push --force *not* _this_\nDecision baa805bb7ae2"
    code = "git push --force *not* _this_"
    start = units(f"{title}\nRun this first:\n")
    entities = [{"type": "bold", "offset": 0, "length": units(title)},
                {"type": "pre", "offset": start, "length": units(code), "language": "bash"},
                {"type": "code", "offset": units(body) - 12, "length": 12}]
    keyboard = {"inline_keyboard": [[{"text": "Continue", "callback_data": "piw:1"},
                                     {"text": "Replan", "callback_data": "piw:2"}]]}
    send(fake, text="1/2 the first part", disable_notification=True)
    card = send(fake, text=body, entities=entities, reply_markup=keyboard)
    send(fake, text="Replan: What should change?", reply_parameters={"message_id": card},
         reply_markup={"force_reply": True, "input_field_placeholder": "What should change?"})
    assert call(fake.base_url, "editMessageReplyMarkup", {
        "chat_id": CHAT, "message_id": card, "reply_markup": {"inline_keyboard": []}})[0] == 200
    assert transcript(fake) == [
        "PiW Decisions (silent):",
        "    1/2 the first part",
        "PiW Decisions:",
        "    **Ship 🚀 release 2.0? «שלום»**",
        "    Run this first:",
        "    ```bash",
        "    git push --force *not* _this_",
        "    ```",
        "    Decision `baa805bb7ae2`",
        "    [ Continue ] [ Replan ]",
        "PiW Decisions ↪ replying to “Ship 🚀 release 2.0? «שלום»”:",
        "    Replan: What should change?",
        "    (the reply box opens: “What should change?”)",
        "buttons removed from “Ship 🚀 release 2.0? «שלום»”",
    ]


def test_the_persons_presses_and_replies_are_in_the_transcript_in_order(
    fake: FakeBotApi,
) -> None:
    card = send(fake, text="Approve the plan?", reply_markup={"inline_keyboard": [
        [{"text": "Continue", "callback_data": "piw:aa"}], [{"text": "Stop",
                                                            "callback_data": "piw:bb"}]]})
    fake.push_fixture("callback_press.json", {
        "user_id": CHAT, "chat_id": CHAT, "message_id": card, "message_text": "Approve",
        "callback_data": "piw:bb"})
    [pressed] = fake.pushed_updates()
    query = pressed.update["callback_query"]["id"]
    assert call(fake.base_url, "answerCallbackQuery", {"callback_query_id": query,
                                                       "text": "Stop chosen"})[0] == 200
    fake.push_update({"message": {
        "from": {"id": CHAT, "is_bot": False, "first_name": "Ada", "last_name": "L"},
        "chat": {"id": CHAT, "type": "private"}, "date": 1, "text": "stop\nnow",
        "reply_to_message": {"message_id": card, "chat": {"id": CHAT}, "text": "x"}}})
    fake.push_update({"message": {"from": {"id": CHAT, "first_name": "Ada"},
                                  "chat": {"id": CHAT, "type": "private"}, "date": 1,
                                  "text": "/pending"}})
    assert transcript(fake) == [
        "PiW Decisions:", "    Approve the plan?", "    [ Continue ]", "    [ Stop ]",
        "Ada pressed [ Stop ] on “Approve the plan?”",
        "PiW Decisions shows Ada a notice: “Stop chosen”",
        "Ada L ↪ replying to “Approve the plan?”:", "    stop", "    now",
        "Ada:", "    /pending",
    ]
    # The fake numbered the person's messages after the bot's, as Telegram does.
    assert [p.update["message"]["message_id"] for p in fake.pushed_updates()[1:]] == [
        card + 1, card + 2]


def test_the_bots_name_comes_from_getme_before_its_first_message(fake: FakeBotApi) -> None:
    assert call(fake.base_url, "getMe")[0] == 200
    [get_me] = fake.requests("getMe")
    menu = RecordedRequest(2, "setMyCommands", "POST", "", b"", {}, {"commands": (
        '[{"command":"pending","description":"List open decisions"}]')}, True, None, 0.0,
        0.1, 200, True)
    assert render([get_me, menu]) == [
        "00:00:00 PiW Decisions set its command menu: /pending (List open decisions)"]
    assert render([menu]) == ["00:00:00 Bot set its command menu: /pending (List open decisions)"]


def test_what_never_reached_the_chat_says_so(fake: FakeBotApi) -> None:
    status, _ = call(fake.base_url, "sendMessage", {"chat_id": CHAT, "text": "x" * 5000})
    assert status == 400
    call(fake.base_url, "getUpdates", {"timeout": 0})
    call(fake.base_url, "sendMessage", {"chat_id": CHAT, "text": "hi"}, token="1:wrong")
    assert transcript(fake) == [f"× a message was not delivered (HTTP 400): “{'x' * 39}…”"]


def test_a_group_message_names_its_chat_and_topic_and_a_mention_stays_readable(
    fake: FakeBotApi,
) -> None:
    group = -1001234567890
    text = "Ada, what should change?"
    status, _ = call(fake.base_url, "sendMessage", {
        "chat_id": group, "text": text, "message_thread_id": 7,
        "entities": [{"type": "text_mention", "offset": 0, "length": 3,
                      "user": {"id": CHAT, "is_bot": False, "first_name": "Ada"}}]})
    assert status == 200
    assert transcript(fake) == [
        f"PiW Decisions in chat {group}, topic 7:",
        f"    [Ada](tg://user?id={CHAT}), what should change?"]


def test_readable_handles_nesting_quotes_and_entities_outside_the_text() -> None:
    text = "quote line\nsecond 😀 bold\nafter"
    entities = [{"type": "blockquote", "offset": 0, "length": units("quote line\nsecond 😀 bold")},
                {"type": "bold", "offset": units("quote line\nsecond 😀 "), "length": 4},
                {"type": "italic", "offset": units("quote line\nsecond 😀 "), "length": 2},
                {"type": "bold", "offset": 90, "length": 3}, {"type": "url"}, "junk"]
    assert readable(text, entities) == "> quote line\n> second 😀 **_bo_ld**\nafter"
    assert readable("plain", None) == "plain"
    assert readable("x", '[{"type":"bold","offset":0,"length":1}]') == "**x**"


def test_shorten_quotes_the_first_line_and_cuts_with_an_ellipsis() -> None:
    assert shorten("\n\n  Ship it?  \nmore") == "Ship it?"
    assert shorten("a" * 50) == "a" * 39 + "…"


def test_the_transcript_is_a_pure_function_of_the_events() -> None:
    sent = RecordedRequest(1, "sendMessage", "POST", "", b"", {}, {
        "chat_id": str(CHAT), "text": "Hello"}, True, None, 0.0, 0.5, 200,
        {"message_id": 4, "chat": {"id": CHAT}, "from": {"first_name": "Bot B"}})
    press = PushedUpdate(1, 1.0, {"update_id": 9, "callback_query": {
        "id": "q", "from": {"id": 1, "first_name": "Bo"}, "data": "piw:zz",
        "message": {"message_id": 4, "chat": {"id": CHAT}}}})
    once = render([sent, press])
    assert once == render([sent, press]) == [
        "00:00:00 Bot B:", "    Hello", "00:00:01 Bo pressed a button (piw:zz) on “Hello”"]
    assert Transcript().lines(press) == ["00:00:01 Bo pressed a button (piw:zz) on message 4"]


def test_the_follower_prints_each_event_once_and_never_waits_for_a_long_poll(
    fake: FakeBotApi,
) -> None:
    follower = TranscriptFollower(fake)
    send(fake, text="first")
    assert [TIME.sub("", line) for line in follower.new_lines()] == ["PiW Decisions:",
                                                                      "    first"]
    assert follower.new_lines() == []
    poll = threading.Thread(target=call, args=(fake.base_url, "getUpdates", {"timeout": 3}),
                            kwargs={"timeout": 10})
    poll.start()
    assert fake.wait_received("getUpdates")
    send(fake, text="second")
    assert [TIME.sub("", line) for line in follower.new_lines()] == ["PiW Decisions:",
                                                                      "    second"]
    fake.close()
    poll.join()
