"""Groups as Telegram defines them (issue 12), through real `poll` processes.

The fake runs in privacy mode (a bot's default: in a group it sees only replies to its own
messages and commands) with the bot of the recorded fixtures, and serves updates built from
the recorded group fixtures in tests/fixtures/telegram/ (group, forum topic, removal,
migration), with the ids of the messages this test's decision really got.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.telegram.fake import FakeBotApi, Fault, fixture_updates, load_fixture
from channels.decisions.presentation import fingerprint
from channels.decisions.workflows import AskHandle
from channels.telegram import alerts
from state.database import Database
from tests.channels.telegram.helpers import (
    FIXTURES,
    TOKEN,
    button_data,
    channel_id_of,
    configure_telegram_profile,
    db_rows,
    inbox_results,
    inbox_states,
    message_parts,
    open_decision_now,
    outcome_count,
    resolutions,
    run_cli,
)

ADA, ZOE, MALLORY = 5123456789, 6234567890, 9876543210
GROUP, FORUM, TOPIC = -4012345678, -1002123456789, 77
SUPERGROUP = -1001987654321
BOT = {"id": 7000000001, "is_bot": True, "first_name": "PiW Decisions",
       "username": "piw_decisions_bot"}
FORCE_REPLY = {"force_reply": True, "selective": True}


def recorded(name: str) -> dict[str, Any]:
    """The one update of a recorded fixture (its update id dropped: the fake numbers it)."""
    [update] = fixture_updates(FIXTURES / name)
    update.pop("update_id")
    return update


@dataclass
class Group:
    home: Path
    fake: FakeBotApi
    chat: int

    def poll(self, expect: int = 0) -> str:
        result = run_cli(self.home, "poll", "--once")
        assert result.returncode == expect, result.stderr
        return result.stderr

    def delivered(self, handle: AskHandle) -> int:
        ref = message_parts(handle.decision_id)[-1].message_ref
        assert ref is not None
        return int(ref)

    def press(self, handle: AskHandle, choice: str, *, fixture: str = "callback_group.json",
              user: dict[str, Any] | None = None) -> int:
        update = recorded(fixture)
        query = update["callback_query"]
        query["id"] = f"cb-{len(self.fake.requests())}-{choice}"
        query["message"]["message_id"] = self.delivered(handle)
        query["data"] = button_data(handle, choice)
        if user is not None:
            query["from"] = user
        return self.fake.push_update(update)

    def prompt(self) -> dict[str, Any]:
        """The prompt message as the fake sent it (what Telegram would hold)."""
        [request] = [r for r in self.fake.requests("sendMessage")
                     if r.params.get("reply_markup") == FORCE_REPLY]
        [message] = [m for m in self.fake.sent_messages(self.chat)
                     if m["text"] == request.params["text"]]
        return message

    def reply(self, prompt: dict[str, Any], text: str, *,
              fixture: str = "reply_to_prompt_group.json") -> int:
        update = recorded(fixture)
        message = update["message"]
        replied = copy.deepcopy(prompt)
        replied.pop("x_future_field", None)
        message["reply_to_message"] = replied
        message["message_id"] = int(prompt["message_id"]) + 1
        message["text"] = text
        return self.fake.push_update(update)


def _group(home: Path, chat: int, users: tuple[int, ...] = (ADA, ZOE)) -> Iterator[Group]:
    with FakeBotApi(TOKEN, bot_user=BOT, privacy_mode=True) as fake:
        configure_telegram_profile(home, fake.base_url, user_ids=users, chat_ids=(chat,))
        yield Group(home, fake, chat)


@pytest.fixture
def group(home: Path) -> Iterator[Group]:
    yield from _group(home, GROUP)


@pytest.fixture
def forum(home: Path) -> Iterator[Group]:
    yield from _group(home, FORUM)


def _entity_shape(entities: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["type"], e["offset"], e["length"], e["user"]["id"], e["user"]["first_name"])
            for e in entities if e["type"] == "text_mention"]


def test_a_group_prompt_mentions_the_presser_so_selective_force_reply_targets_them(
    group: Group,
) -> None:
    handle = open_decision_now()
    group.poll()
    press = group.press(handle, "replan")
    group.poll()
    [request] = [r for r in group.fake.requests("sendMessage")
                 if r.params.get("reply_markup") == FORCE_REPLY]
    wire = load_fixture(FIXTURES / "response_send_message_prompt_group.json")["result"]
    fp = fingerprint(handle.request.presentation_digest)
    assert wire["text"] == "Ada, Replan: What should change?"  # recorded before it named the card
    assert request.params["text"] == f"Ada, Replan: What should change?\nDecision {fp}"
    assert json.loads(request.fields["entities"]) == [{
        "type": "text_mention", "offset": 0, "length": 3,
        "user": {"id": ADA, "is_bot": False, "first_name": "Ada"}},
        {"type": "code", "offset": 42, "length": 12}]
    assert "message_thread_id" not in request.params
    prompt = group.prompt()
    assert _entity_shape(prompt["entities"]) == _entity_shape(wire["entities"])

    # Privacy mode: a plain group message never reaches the bot; the reply to its prompt does.
    plain = recorded("reply_to_prompt_group.json")
    plain["message"].pop("reply_to_message")
    group.fake.push_update(plain)
    reply = group.reply(prompt, "Split step 3 into two migrations.  ")
    group.poll()
    assert inbox_results() == [(press, "callback", "prompted"), (reply, "reply", "won")]
    [(outcome, provenance, event)] = resolutions(handle.decision_id)
    assert (outcome, provenance, event) == ("accepted", "human", str(reply))
    [response] = db_rows("SELECT b.content FROM human_decision_resolutions r JOIN blobs b"
                         " ON b.blob_hash = r.response_hash WHERE r.decision_id = ?",
                         handle.decision_id)
    assert json.loads(bytes(response[0]))["input"] == {
        "instructions": "Split step 3 into two migrations.  "}

    # An edited reply is never fetched (edited_message is not asked for): the answer stands.
    edited = recorded("edited_message.json")
    edited["edited_message"]["chat"] = prompt["chat"]
    group.fake.push_update(edited)
    group.poll()
    assert [s.update_id for s in inbox_states()] == [press, reply]
    assert len(resolutions(handle.decision_id)) == 1


def test_a_forum_topic_prompt_goes_to_the_topic_and_the_topic_reply_binds(forum: Group) -> None:
    handle = open_decision_now()
    forum.poll()
    press = forum.press(handle, "replan", fixture="callback_forum_topic.json")
    forum.poll()
    [request] = [r for r in forum.fake.requests("sendMessage")
                 if r.params.get("reply_markup") == FORCE_REPLY]
    assert request.params["message_thread_id"] == str(TOPIC)
    wire = load_fixture(FIXTURES / "response_send_message_prompt_forum_topic.json")["result"]
    prompt = forum.prompt()
    assert (prompt["message_thread_id"], prompt["is_topic_message"]) == (
        wire["message_thread_id"], wire["is_topic_message"])
    fp = fingerprint(handle.request.presentation_digest)
    assert prompt["text"] == wire["text"] + f"\nDecision {fp}"  # it names its decision now
    assert _entity_shape(prompt["entities"]) == _entity_shape(wire["entities"])
    reply = forum.reply(prompt, "Ship it after the review.",
                        fixture="reply_to_prompt_forum_topic.json")
    forum.poll()
    assert inbox_results() == [(press, "callback", "prompted"), (reply, "reply", "won")]


def test_two_approvers_pressing_at_once_in_one_group_get_one_winner(group: Group) -> None:
    handle = open_decision_now()
    group.poll()
    zoe = recorded("callback_supergroup.json")["callback_query"]["from"]
    ada_press = group.press(handle, "continue")
    zoe_press = group.press(handle, "stop", user=zoe)
    group.poll()  # one batch, both presses
    assert inbox_results() == [(ada_press, "callback", "won"),
                               (zoe_press, "callback", "already_resolved")]
    assert [r[:2] for r in resolutions(handle.decision_id)] == [("accepted", "human")]
    answers = Counter(str(r.params.get("text")) for r in group.fake.requests(
        "answerCallbackQuery"))
    assert answers == Counter({"Accepted: Continue": 1,
                               "Already decided: Continue, by Ada Lovelace": 1})
    assert outcome_count(group.fake, "Continue", GROUP) == 1
    assert [r.status for r in group.fake.requests("editMessageReplyMarkup")] == [200]


def test_the_bot_removed_from_a_group_is_recorded_and_its_sends_are_refused_not_retried(
    group: Group,
) -> None:
    removed = group.fake.push_update(recorded("my_chat_member_removed_group.json"))
    # Told at once, before a send to that chat fails (the config must change).
    assert f"the bot was removed from (or blocked in) chat {GROUP}" in group.poll(expect=78)
    [state] = inbox_states()
    assert (state.update_id, state.result) == (removed, {"result": "ignored:bot_removed",
                                                         "chatId": GROUP})
    handle = open_decision_now()
    group.fake.inject("sendMessage", Fault.error(
        403, "Forbidden: bot was kicked from the group chat"))
    assert "was refused for chat -4012345678" in group.poll(expect=78)  # cron hears of it
    group.poll(expect=78)  # still refused; the hourly repeat keeps it quiet
    assert len(group.fake.requests("sendMessage")) == 1  # refused for good: not retried
    assert [s for (s,) in db_rows("SELECT status FROM effects WHERE source_resource_id = ?",
                                  f"decision:{handle.decision_id}")] == ["rejected"]


def test_a_migrated_group_is_recorded_with_its_new_id_and_the_error_carries_it(
    group: Group,
) -> None:
    migrated = group.fake.push_update(recorded("message_migrate_to_chat.json"))
    # Told at once, with the new id and the change to make, before a send fails.
    assert f"group {GROUP} became supergroup {SUPERGROUP}" in group.poll(expect=78)
    [state] = inbox_states()
    assert (state.update_id, state.result) == (migrated, {
        "result": "ignored:chat_migrated", "chatId": GROUP, "migrateToChatId": SUPERGROUP})
    open_decision_now()
    group.fake.inject("sendMessage", Fault.migrated(SUPERGROUP))
    line = group.poll(expect=78)
    assert f"became supergroup {SUPERGROUP}; replace {GROUP} with {SUPERGROUP}" in line
    with Database.open_reader() as db:
        error = alerts.last_provider_error(db.conn, channel_id_of())
    assert error is not None and error["migrateToChatId"] == SUPERGROUP
    assert {r.params["chat_id"] for r in group.fake.requests("sendMessage")} == {str(GROUP)}


def test_a_second_approver_pressing_a_text_choice_gets_a_prompt_that_names_them(
    group: Group,
) -> None:
    handle = open_decision_now()
    group.poll()
    zoe = recorded("callback_supergroup.json")["callback_query"]["from"]
    group.press(handle, "replan")
    group.press(handle, "replan", user=zoe)
    group.poll()
    prompts = [r for r in group.fake.requests("sendMessage")
               if r.params.get("reply_markup") == FORCE_REPLY]
    fp = fingerprint(handle.request.presentation_digest)
    assert [r.params["text"] for r in prompts] == [
        f"Ada, Replan: What should change?\nDecision {fp}",
        f"{zoe['first_name']}, Replan: What should change?\nDecision {fp}"]
    assert [json.loads(r.fields["entities"])[0]["user"]["id"] for r in prompts] == [ADA, ZOE]
    # Zoe answers on her own prompt; a second press of hers reuses it.
    group.press(handle, "replan", user=zoe)
    group.poll()
    assert len([r for r in group.fake.requests("sendMessage")
                if r.params.get("reply_markup") == FORCE_REPLY]) == 2
    [zoe_prompt] = [m for m in group.fake.sent_messages(group.chat)
                    if m["text"] == prompts[1].params["text"]]
    reply = group.reply(zoe_prompt, "Zoe's instructions.")
    group.poll()
    assert inbox_results()[-1] == (reply, "reply", "won")
    [response] = db_rows("SELECT b.content FROM human_decision_resolutions r JOIN blobs b"
                         " ON b.blob_hash = r.response_hash WHERE r.decision_id = ?",
                         handle.decision_id)
    assert json.loads(bytes(response[0]))["input"] == {"instructions": "Zoe's instructions."}


def test_a_reply_to_another_approvers_prompt_answers_as_the_one_who_replied(
    group: Group,
) -> None:
    handle = open_decision_now()
    group.poll()
    group.press(handle, "replan")  # Ada's prompt
    group.poll()
    update = recorded("reply_to_prompt_group.json")
    zoe = recorded("callback_supergroup.json")["callback_query"]["from"]
    update["message"]["from"] = zoe
    update["message"]["reply_to_message"] = copy.deepcopy(group.prompt())
    update["message"]["message_id"] = int(group.prompt()["message_id"]) + 1
    update["message"]["text"] = "Zoe answers Ada's prompt."
    reply = group.fake.push_update(update)
    group.poll()
    assert inbox_results()[-1] == (reply, "reply", "won")
    assert db_rows("SELECT actor_id FROM human_decision_resolutions WHERE decision_id = ?",
                   handle.decision_id) == [(f"telegram-user:{ZOE}",)]


def test_a_group_card_prompt_and_outcome_match_their_golden_file(group: Group) -> None:
    """Golden: what a group sees, byte for byte (tests/fixtures/cards/group.json): the card,
    the prompt naming the person who pressed (a text_mention), their reply's outcome post."""
    handle = open_decision_now()
    group.poll()
    group.press(handle, "replan")
    group.poll()
    group.reply(group.prompt(), "Split step 3 into two migrations.")
    group.poll()
    sent = []
    for request in group.fake.requests("sendMessage"):
        params = {key: (json.loads(value) if key in ("entities", "reply_markup",
                                                     "reply_parameters") else value)
                  for key, value in request.fields.items()}
        for row in params.get("reply_markup", {}).get("inline_keyboard", []):
            for button in row:  # the token covers the decision id, new every run
                button["callback_data"] = "piw:<token>"
        params["text"] = re.sub(r" at \d\d:\d\d UTC\n", " at HH:MM UTC\n", params["text"])
        sent.append(params)
    golden = FIXTURES.parent / "cards" / "group.json"
    if os.environ.get("PIW_UPDATE_GOLDEN") == "1":
        golden.write_text(json.dumps(sent, ensure_ascii=False, indent=1) + "\n")
    assert sent == json.loads(golden.read_text())
