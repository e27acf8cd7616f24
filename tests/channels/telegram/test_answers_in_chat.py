"""What a person meets in the chat around a card: prompts and outcome posts threaded under it
and naming who answered, late presses and replies told what won, answers typed as a reply to
the card (by number or label), `/pending`, the commands the menu offers, and outcome posts that always fit Telegram's limits.
The real poll cycle against the loopback fake Bot API (its recorded update fixtures).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.telegram.fake import FakeBotApi
from adapters.telegram.fake.fixtures import load_fixture
from channels.decisions.presentation import fingerprint
from channels.telegram.commands import HANDLERS, MENU
from channels.telegram.text_answers import choice_named, command, hint, pending_list
from state.database import Database
from tests.channels.telegram.helpers import FIXTURES, is_outcome, settled_labels
from tests.channels.telegram.test_channel import CHAT, TOKEN, USER, Flow, _configure


@pytest.fixture
def flow(home: Path) -> Iterator[Flow]:
    with FakeBotApi(token=TOKEN) as server:
        _configure(home, server.base_url, [str(CHAT)])
        with Database.open_writer() as db:
            yield Flow(home, server, db)


CHOICES = {"continue": {"label": "Continue"}, "stop": {"label": "Stop"},
           "replan": {"label": "Replan", "input": {}}}


def card_id(flow: Flow, index: int = 0) -> int:
    return int(flow.server.sent_messages(CHAT)[index]["message_id"])


def reply_to(flow: Flow, message_id: int, text: str) -> int:
    """The person replies to one of the bot's messages (the recorded reply fixture)."""
    new_id = int(flow.server.sent_messages(CHAT)[-1]["message_id"]) + 1
    return flow.reply(text, prompt_message_id=message_id, message_id=new_id)


def sends_after(flow: Flow, count: int) -> list[dict[str, Any]]:
    return flow.sends()[count:]


# -- pure parts ----------------------------------------------------------------------------------


def test_a_reply_names_a_choice_by_number_or_label_and_nothing_else() -> None:
    assert choice_named(CHOICES, "2") == "stop"
    assert choice_named(CHOICES, " 1. ") == "continue"
    assert choice_named(CHOICES, "REPLAN") == "replan"
    assert choice_named(CHOICES, "stop!") == "stop"
    for unclear in ("4", "0", "yes", "continue please", "", "1 2"):
        assert choice_named(CHOICES, unclear) is None, unclear
    assert hint(CHOICES) == "Reply with a number or a choice: 1 Continue, 2 Stop, 3 Replan"


def test_commands_are_recognised_with_or_without_the_bot_name() -> None:
    assert command("/pending") == command("/pending@piw_bot extra") == "pending"
    assert command("/Pending") == "pending"
    assert command("pending") is None and command("/") is None
    assert command("/pending@other_bot", "piw_bot") is None
    assert pending_list([]) == "Nothing is waiting for an answer."


# -- threading and naming ----------------------------------------------------------------------


def test_the_outcome_post_replies_to_the_card_and_says_who_chose_what(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    flow.press(handle, "stop")
    flow.poll()
    [post] = [s for s in flow.sends() if is_outcome(s["text"], "Stop", "Approve?")]
    assert post["reply_parameters"] == {"message_id": card_id(flow),
                                        "allow_sending_without_reply": True}
    assert re.fullmatch(r"Ada chose Stop on Telegram at \d\d:\d\d UTC\nApprove\?\n"
                        rf"Decision {fingerprint(handle.request.presentation_digest)}",
                        post["text"])
    entities = json.loads(post["entities"]) if isinstance(post["entities"], str) \
        else post["entities"]
    assert entities[0] == {"type": "bold", "offset": 0, "length": post["text"].index("\n")}


def test_a_typed_answer_is_echoed_and_a_10000_character_title_still_settles(flow: Flow) -> None:
    title = "Approve? " + "very long title " * 700
    handle = flow.ask(title=title)
    flow.poll()
    flow.press(handle, "replan")
    flow.poll()
    prompt = flow.server.sent_messages(CHAT)[-1]
    reply_to(flow, int(prompt["message_id"]), "use the staging db")
    flow.poll()
    assert flow.view(handle).choice == "replan"
    [post] = [s for s in flow.sends() if " chose Replan " in s["text"]]
    assert len(post["text"]) < 4096 and "“use the staging db”" in post["text"]
    assert "…" in post["text"]  # the title is shortened, never refused
    assert flow.effect_statuses("telegram.settle") == ["applied"]
    rows = flow.rows("SELECT status FROM channel_messages WHERE purpose = 'settlement'")
    assert rows == [("confirmed",)]


# -- late answers ------------------------------------------------------------------------------


def test_a_late_reply_to_a_prompt_is_told_what_won_and_by_whom(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    flow.press(handle, "replan")
    flow.poll()
    prompt = flow.server.sent_messages(CHAT)[-1]
    flow.press(handle, "continue")
    flow.poll()
    before = len(flow.sends())
    late = reply_to(flow, int(prompt["message_id"]), "too late")
    flow.poll()
    [notice] = sends_after(flow, before)
    assert notice["text"] == "Already decided: Continue, by Ada"
    assert notice["reply_parameters"]["message_id"] == late_message_id(flow, late)
    assert flow.view(handle).choice == "continue"


def late_message_id(flow: Flow, update_id: int) -> int:
    [row] = flow.rows("SELECT payload_hash FROM channel_inbox WHERE external_event_id = ?",
                      str(update_id))
    payload = json.loads(flow.rows("SELECT content FROM blobs WHERE blob_hash = ?", row[0])[0][0])
    return int(payload["messageId"])


# -- answers by text ---------------------------------------------------------------------------


def test_a_reply_to_the_card_with_a_number_answers_it(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    update = reply_to(flow, card_id(flow), "2")
    flow.poll()
    assert flow.view(handle).choice == "stop"
    assert flow.inbox()[str(update)] == {"result": "won", "message": "accepted",
                                         "outcome": "accepted", "by": "text"}
    assert flow.rows("SELECT idempotency_key FROM human_decision_resolutions") == [
        (f"telegram:default:text:{CHAT}:{late_message_id(flow, update)}",)]
    assert any(is_outcome(s["text"], "Stop", "Approve?") for s in flow.sends())
    settled = flow.server.sent_messages(CHAT)[0]["reply_markup"]["inline_keyboard"]
    assert settled_labels(settled) == ["Continue", "✓ Stop", "Replan"]  # settled, marked
    # the reply that answered gets its receipt
    assert flow.server.reactions() == {(CHAT, late_message_id(flow, update)): ["👍"]}


def test_a_reply_with_a_text_choice_label_asks_for_its_text(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    reply_to(flow, card_id(flow), "replan")
    flow.poll()
    prompt = flow.server.sent_messages(CHAT)[-1]
    assert prompt["text"].startswith("Replan: What should change?")
    reply_to(flow, int(prompt["message_id"]), "smaller steps")
    flow.poll()
    view = flow.view(handle)
    assert (view.choice, view.input) == ("replan", {"text": "smaller steps"})


def test_an_unclear_reply_gets_a_hint_and_answers_nothing(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    before = len(flow.sends())
    update = reply_to(flow, card_id(flow), "yes please")
    flow.poll()
    [notice] = sends_after(flow, before)
    assert notice["text"] == "Reply with a number or a choice: 1 Continue, 2 Stop, 3 Replan"
    assert flow.inbox()[str(update)]["result"] == "ignored:unclear_text"
    assert flow.view(handle).status == "open"
    flow.poll()
    assert len(flow.sends()) == before + 1  # said once


def test_a_reply_from_a_stranger_is_ignored_without_an_answer(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    before = len(flow.sends())
    update = flow.reply("1", prompt_message_id=card_id(flow), message_id=99, user=999, chat=CHAT)
    flow.poll()
    assert flow.inbox()[str(update)]["result"] == "ignored:not_allowed"
    assert len(flow.sends()) == before and flow.view(handle).status == "open"


# -- /pending ----------------------------------------------------------------------------------


def push_command(flow: Flow, text: str, user: int = USER, message_id: int | None = None) -> int:
    [update] = load_fixture(FIXTURES / "message_plain_text.json")["result"]
    update["message"]["text"] = text
    if message_id is not None:  # a chat's messages have ids of their own
        update["message"]["message_id"] = message_id
    update["message"]["from"]["id"] = user
    update["message"]["chat"]["id"] = CHAT
    update.pop("update_id")
    return flow.server.push_update(update)


def test_pending_lists_the_open_decisions_and_sends_their_cards_again(flow: Flow) -> None:
    first = flow.ask(title="Deploy?")
    second = flow.ask(title="Migrate?")
    flow.poll()
    before = len(flow.sends())
    update = push_command(flow, "/pending")
    flow.poll()
    sent = sends_after(flow, before)
    fps = [fingerprint(h.request.presentation_digest) for h in (first, second)]
    # Each line names the agent that asked (a workflow's run: no host recorded).
    assert sent[0]["text"] == (f"2 waiting; their cards follow:\n1. Deploy? · {fps[0]} ·"
                               f" workflow\n2. Migrate? · {fps[1]} · workflow")
    copies = sent[1:]
    assert [c["text"].split("\n")[0] for c in copies] == ["Deploy?", "Migrate?"]
    assert all(c["reply_markup"]["inline_keyboard"] for c in copies)
    assert flow.inbox()[str(update)] == {"result": "listed", "count": 2}
    # A press on the copy answers; settlement takes the keyboards off the card and the copy.
    flow.press(first, "continue", message_id=int(flow.server.sent_messages(CHAT)[-2]
                                                 ["message_id"]))
    flow.poll()
    assert flow.view(first).choice == "continue"
    edited = sorted(int(e.params["message_id"]) for e in
                    flow.server.requests("editMessageReplyMarkup"))
    assert len(edited) == 2


def test_the_menu_offers_every_command_the_bot_answers_and_no_other(flow: Flow) -> None:
    # `setup` registers MENU (setMyCommands); HANDLERS is what the bot acts on.
    assert sorted(name for name, _ in MENU) == sorted(HANDLERS) and len(MENU) == len(HANDLERS)
    for number, (name, _) in enumerate(MENU, start=901):
        before = len(flow.sends())
        update = push_command(flow, f"/{name}", message_id=number)
        flow.poll()
        result = flow.inbox()[str(update)]["result"]
        assert not result.startswith("ignored"), (name, result)
        said = sends_after(flow, before)
        assert said and str(said[0]["chat_id"]) == str(CHAT), name  # answered in the chat
    update = push_command(flow, "/start", message_id=900)  # not in the menu: unknown
    flow.poll()
    assert flow.inbox()[str(update)]["result"] == "ignored:unknown_command"


def test_pending_from_a_stranger_is_ignored(flow: Flow) -> None:
    flow.ask()
    flow.poll()
    before = len(flow.sends())
    update = push_command(flow, "/pending", user=999)
    flow.poll()
    assert flow.inbox()[str(update)]["result"] == "ignored:not_allowed"
    assert len(flow.sends()) == before
