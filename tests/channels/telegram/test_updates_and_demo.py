"""Update parsing (recorded fixtures -> minimal inbox events) and the `demo` command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from channels.telegram.updates import next_offset, press_field, to_event
from tests.conftest import child_env
from tests.paths import ROOT

FIXTURES = ROOT / "tests/fixtures/telegram"


def updates(name: str) -> list[dict[str, object]]:
    result = json.loads((FIXTURES / name).read_text())["result"]
    assert isinstance(result, list)
    return result


def test_a_supergroup_callback_keeps_only_what_processing_needs() -> None:
    [update] = updates("callback_supergroup.json")
    event = to_event(update)
    assert event is not None and event.event_type == "callback"
    assert event.external_event_id == str(update["update_id"])
    # Stored for every press, so members that say what nearly every press says are left out
    # (no thread, an accessible message, not inline): `press_field` reads them back.
    assert event.payload == {
        "callbackId": "4410371836592057102", "userId": 6234567890, "userName": "Zo\u00eb",
        "userFullName": "Zo\u00eb \u00c6r\u00f8sk\u00f8bing",
        "chatId": -1001987654321, "messageId": 310, "data": "piw:1b88630ac41bd9b13c5af743"}
    assert [press_field(event.payload, k) for k in ("threadId", "accessible", "inline")] == [
        None, True, False]
    # A payload of an earlier version, every member written out, reads the same.
    earlier = {**event.payload, "threadId": None, "accessible": True, "inline": False}
    assert all(press_field(earlier, k) == press_field(event.payload, k) for k in earlier)


def test_a_first_name_that_is_the_full_name_is_stored_once() -> None:
    query = {"id": "7", "data": "piw:1b88630ac41bd9b13c5af743",
             "from": {"id": 5, "first_name": "Ada"},
             "message": {"message_id": 9, "date": 1, "chat": {"id": 5}}}
    payload = to_event({"update_id": 1, "callback_query": query}).payload
    assert "userName" not in payload and payload["userFullName"] == "Ada"
    assert press_field(payload, "userName") == "Ada"
    # No first name but a last one: the first name is null, not the full name.
    query["from"] = {"id": 5, "last_name": "Lovelace"}
    payload = to_event({"update_id": 2, "callback_query": query}).payload
    assert payload["userName"] is None and press_field(payload, "userName") is None
    inline = to_event({"update_id": 3, "callback_query": {**query, "inline_message_id": "x"}})
    assert inline.payload["inline"] is True


def test_a_forum_topic_callback_carries_its_thread() -> None:
    [update] = updates("callback_forum_topic.json")
    event = to_event(update)
    assert event is not None and isinstance(event.payload["threadId"], int)


def test_an_inaccessible_message_is_marked_so_it_is_never_reconciled() -> None:
    [update] = updates("callback_inaccessible_message.json")
    event = to_event(update)
    assert event is not None and event.payload["accessible"] is False


def test_a_reply_keeps_the_exact_text_and_its_target() -> None:
    [update] = updates("reply_to_prompt.json")
    event = to_event(update)
    assert event is not None and event.event_type == "reply"
    assert event.payload["replyTo"] == 43 and event.payload["replyToBot"] is True
    assert event.payload["text"].endswith("trailing spaces  ")


@pytest.mark.parametrize(
    ("update", "kind"),
    [({"update_id": 1, "edited_message": {"message_id": 1}}, "edited_message"),
     ({"update_id": 3, "message": {"message_id": 1, "text": "hi"}}, "plain_message"),
     ({"update_id": 4}, "empty")],
)
def test_other_updates_become_other_events_with_their_kind(update: dict[str, object],
                                                           kind: str) -> None:
    event = to_event(update)
    assert event is not None and event.event_type == "other"
    assert event.payload == {"kind": kind}


@pytest.mark.parametrize(("update", "kind"), [
    (None, "not_an_object"), ("text", "not_an_object"), ([], "not_an_object"),
    ({"message": {}}, "bad_update_id"), ({"update_id": "7"}, "bad_update_id"),
    ({"update_id": True}, "bad_update_id"), ({"update_id": 7.0}, "bad_update_id"),
    ({"update_id": -1}, "bad_update_id"), ({"update_id": 2**64 + 7}, "bad_update_id")])
def test_an_update_without_a_usable_id_is_an_ignored_event_with_a_content_id(
    update: object, kind: str,
) -> None:
    event = to_event(update)
    assert (event.event_type, event.payload) == ("other", {"kind": kind})
    assert event.external_event_id.startswith("malformed:")
    assert to_event(update).external_event_id == event.external_event_id  # a re-fetch dedups


def test_text_that_is_not_valid_unicode_is_never_kept() -> None:
    press = to_event({"update_id": 9, "callback_query": {
        "id": "\ud800", "from": {"id": 1}, "data": "\udc00\ud800",
        "message": {"message_id": 1, "chat": {"id": 1}, "date": 5}}})
    assert (press_field(press.payload, "callbackId"), press_field(press.payload, "data")) == (
        None, None)
    reply = to_event({"update_id": 10, "message": {
        "message_id": 2, "from": {"id": 1}, "chat": {"id": 1}, "text": "a\udfffb",
        "reply_to_message": {"message_id": 1, "text": "\ud800"}}})
    assert (reply.payload["text"], reply.payload["replyToText"]) == (None, None)


@pytest.mark.parametrize(("status", "kind"), [("left", "bot_removed"), ("kicked", "bot_removed"),
                                              ("member", "my_chat_member"), (None, "my_chat_member")])
def test_the_bots_own_membership_change_keeps_its_chat(status: str | None, kind: str) -> None:
    event = to_event({"update_id": 2, "my_chat_member": {
        "chat": {"id": -5}, "new_chat_member": {"status": status}}})
    assert (event.event_type, event.payload) == ("other", {"kind": kind, "chatId": -5})


def test_a_migration_keeps_the_new_chat_id() -> None:
    event = to_event({"update_id": 3, "message": {"message_id": 1, "chat": {"id": -4},
                                                  "migrate_to_chat_id": -1004}})
    assert event.payload == {"kind": "chat_migrated", "chatId": -4, "migrateToChatId": -1004}


def test_oversize_or_non_text_callback_data_is_dropped() -> None:
    event = to_event({"update_id": 9, "callback_query": {
        "id": "1", "from": {"id": 1}, "message": {"message_id": 1, "chat": {"id": 1},
                                                  "date": 5}, "data": "x" * 65}})
    assert press_field(event.payload, "data") is None and "data" not in event.payload


def test_next_offset_is_the_last_update_plus_one_and_never_moves_back() -> None:
    assert next_offset([{"update_id": 5}, {"update_id": 9}, {"x": 1}], None) == 10
    assert next_offset([{"update_id": -5}, {"update_id": 2**64}], None) is None
    assert next_offset([], 7) == 7
    assert next_offset([{"update_id": 3}], 7) == 7


def test_demo_narrates_the_whole_flow_and_exits_zero(home: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", "from adapters.cli.main import main; main()", "demo"],
        cwd=ROOT, env=child_env(home), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for step in ("delivered in 2 parts", "button 'Replan' pressed", "prompt sent",
                 "reply accepted: decision accepted with 'Replan'", "keyboards removed",
                 "outcome posted: 'Ada chose Replan on Telegram at "):
        assert step in out, step
    assert not (home / ".pi").exists()  # the demo used its own temporary HOME
