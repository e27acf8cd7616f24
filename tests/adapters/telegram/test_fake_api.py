"""The loopback fake Bot API and the recorded fixtures, tested over real HTTP."""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from telegram import Update

from adapters.telegram.errors import FixtureError
from adapters.telegram.fake import (
    BotError,
    FakeBotApi,
    FakeBotApiProcess,
    Fault,
    RemoteFakeBotApi,
    demo_fixture_names,
    fixture_updates,
    load_demo_fixture,
    load_fixture,
)
from adapters.telegram.fake.constants import DESC_CONFLICT_POLL, DESC_CONFLICT_WEBHOOK

TOKEN = "7000000001:AAH-fakeTokenForFakeApiTests_0123456"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "telegram"
UPDATE_FIXTURES = sorted(p for p in FIXTURES.glob("*.json") if not p.name.startswith("response_"))
RESPONSE_FIXTURES = sorted(FIXTURES.glob("response_*.json"))


@pytest.fixture
def server() -> Iterator[FakeBotApi]:
    with FakeBotApi(TOKEN, fixtures_dir=FIXTURES) as fake:
        yield fake


def call(
    base_url: str,
    method: str,
    params: Mapping[str, object] | None = None,
    *,
    token: str = TOKEN,
    as_json: bool = False,
    timeout: float = 5.0,
) -> tuple[int, dict[str, Any]]:
    """POST a Bot API method the way PTB does (form fields, nested values as JSON)."""
    params = params or {}
    if as_json:
        data, ctype = json.dumps(params).encode(), "application/json"
    else:
        fields = {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()}
        data, ctype = urlencode(fields).encode(), "application/x-www-form-urlencoded"
    request = urllib.request.Request(
        f"{base_url}/bot{token}/{method}", data=data, headers={"Content-Type": ctype}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        body = error.read()
        error.close()
        return error.code, json.loads(body)


# --------------------------------------------------------------------------- basics


def test_wrong_token_gets_401_and_the_request_log_never_shows_either_token(
    server: FakeBotApi, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "7000000001:AAH-wrongTokenWrongTokenWrongToken"
    status, body = call(server.base_url, "getMe", token=wrong)
    assert (status, body) == (401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
    assert call(server.base_url, "getMe")[0] == 200
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "/bot<redacted>/getMe" in text
    assert TOKEN not in text and wrong not in text
    assert [r.token_ok for r in server.requests("getMe")] == [False, True]


def test_a_webhook_blocks_get_updates_until_it_is_deleted(server: FakeBotApi) -> None:
    server.push_update({"message": {"chat": {"id": 1, "type": "private"}, "text": "hi"}})
    assert call(server.base_url, "setWebhook", {"url": "https://hooks.example.org/in"}) == (
        200, {"ok": True, "result": True})
    assert call(server.base_url, "getWebhookInfo")[1]["result"] == {
        "url": "https://hooks.example.org/in", "has_custom_certificate": False,
        "pending_update_count": 1}
    assert call(server.base_url, "getUpdates") == (
        409, {"ok": False, "error_code": 409, "description": DESC_CONFLICT_WEBHOOK})
    assert call(server.base_url, "deleteWebhook", {"drop_pending_updates": False})[0] == 200
    assert server.webhook_url == ""
    status, body = call(server.base_url, "getUpdates")
    assert (status, len(body["result"])) == (200, 1)  # the waiting update was kept
    server.set_webhook("https://hooks.example.org/in")
    assert call(server.base_url, "deleteWebhook", {"drop_pending_updates": True})[0] == 200
    assert call(server.base_url, "getUpdates") == (200, {"ok": True, "result": []})


def test_set_my_commands_is_recorded_with_its_commands(server: FakeBotApi) -> None:
    menu = [{"command": "pending", "description": "List"}]
    assert call(server.base_url, "setMyCommands", {"commands": menu}) == (
        200, {"ok": True, "result": True})
    [request] = server.requests("setMyCommands")
    assert request.params["commands"] == menu


def test_get_me_returns_the_recorded_bot_user(server: FakeBotApi) -> None:
    recorded = load_fixture(FIXTURES / "response_get_me.json")
    assert call(server.base_url, "getMe") == (200, recorded)


def test_unknown_method_and_malformed_path_get_404(server: FakeBotApi) -> None:
    assert call(server.base_url, "sendRocket")[1]["description"] == "Not Found: method not found"
    request = urllib.request.Request(f"{server.base_url}/nothing", data=b"")
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=5)
    raised.value.close()
    assert raised.value.code == 404


def test_method_names_are_case_insensitive_and_recorded_canonically(server: FakeBotApi) -> None:
    assert call(server.base_url, "sendmessage", {"chat_id": 1, "text": "hi"})[0] == 200
    assert len(server.requests("sendMessage")) == 1


def test_send_message_echoes_chat_text_keyboard_and_an_unknown_field(server: FakeBotApi) -> None:
    keyboard = {"inline_keyboard": [[{"text": "Continue", "callback_data": "piw:1"}]]}
    params = {"chat_id": -1001987654321, "text": "Größe 🚀", "reply_markup": keyboard}
    status, body = call(server.base_url, "sendMessage", params | {"message_thread_id": 77})
    message = body["result"]
    assert status == 200
    assert message["chat"]["id"] == -1001987654321
    assert message["chat"]["type"] == "supergroup"
    assert (message["message_thread_id"], message["is_topic_message"]) == (77, True)
    assert (message["text"], message["reply_markup"]) == ("Größe 🚀", keyboard)
    assert "x_future_field" in message
    wire = server.requests("sendMessage")[0]
    assert wire.content_type == "application/x-www-form-urlencoded"
    assert wire.fields["reply_markup"] == json.dumps(keyboard)
    assert wire.params["reply_markup"] == keyboard


def test_message_ids_increase_per_chat(server: FakeBotApi) -> None:
    ids = [
        call(server.base_url, "sendMessage", {"chat_id": chat, "text": "x"})[1]["result"][
            "message_id"
        ]
        for chat in (1, 1, 2, 1)
    ]
    assert ids == [1, 2, 1, 3]


def test_json_bodies_are_accepted_like_form_bodies(server: FakeBotApi) -> None:
    status, body = call(server.base_url, "sendMessage", {"chat_id": 5, "text": "t"}, as_json=True)
    assert status == 200 and body["result"]["chat"]["id"] == 5
    assert server.requests("sendMessage")[0].params == {"chat_id": 5, "text": "t"}


def test_an_unparseable_body_is_a_bad_request_and_still_recorded(server: FakeBotApi) -> None:
    request = urllib.request.Request(
        server.method_url("sendMessage"),
        data=b"{nope",
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=5)
    body = json.loads(raised.value.read())
    raised.value.close()
    assert body["description"] == "Bad Request: can't parse request body"
    assert server.requests("sendMessage")[0].body == b"{nope"


@pytest.mark.parametrize(
    ("params", "description"),
    [
        ({"chat_id": 1, "text": ""}, "Bad Request: message text is empty"),
        ({"chat_id": 1, "text": "x" * 4097}, "Bad Request: message is too long"),
        ({"text": "x"}, "Bad Request: chat_id is empty"),
        ({"chat_id": "@nowhere", "text": "x"}, "Bad Request: chat not found"),
        (
            {"chat_id": 1, "text": "x", "reply_markup": "{not json"},
            "Bad Request: can't parse reply keyboard markup JSON object",
        ),
    ],
)
def test_send_message_rejects_what_telegram_rejects(
    server: FakeBotApi, params: dict[str, object], description: str
) -> None:
    assert call(server.base_url, "sendMessage", params) == (
        400,
        {"ok": False, "error_code": 400, "description": description},
    )


def test_edit_reply_markup_removes_a_keyboard_then_reports_not_modified(
    server: FakeBotApi,
) -> None:
    keyboard = {"inline_keyboard": [[{"text": "A", "callback_data": "a"}]]}
    sent = call(
        server.base_url, "sendMessage", {"chat_id": 1, "text": "x", "reply_markup": keyboard}
    )
    edit = {"chat_id": 1, "message_id": sent[1]["result"]["message_id"]}
    edit["reply_markup"] = {"inline_keyboard": []}
    first = call(server.base_url, "editMessageReplyMarkup", edit)
    second = call(server.base_url, "editMessageReplyMarkup", edit)
    missing = call(server.base_url, "editMessageReplyMarkup", edit | {"message_id": 999})
    assert first[0] == 200 and "reply_markup" not in first[1]["result"]
    assert second[1]["description"].startswith("Bad Request: message is not modified")
    assert missing[1]["description"] == "Bad Request: message to edit not found"


def test_answer_callback_query_knows_only_pushed_callbacks(server: FakeBotApi) -> None:
    server.push_fixture("callback_private.json", renumber=False)
    known = call(
        server.base_url, "answerCallbackQuery", {"callback_query_id": "4410371836592057101"}
    )
    unknown = call(server.base_url, "answerCallbackQuery", {"callback_query_id": "1"})
    assert known == (200, {"ok": True, "result": True})
    assert unknown[1]["description"].startswith("Bad Request: query is too old")
    assert server.answered_callbacks() == ["4410371836592057101"]


# --------------------------------------------------------------------------- getUpdates


def test_get_updates_confirms_everything_below_the_offset(server: FakeBotApi) -> None:
    ids = [server.push_update({"message": {"message_id": n}}) for n in range(3)]
    first = call(server.base_url, "getUpdates")[1]["result"]
    again = call(server.base_url, "getUpdates", {"offset": ids[1]})[1]["result"]
    after = call(server.base_url, "getUpdates", {"offset": ids[2] + 1})[1]["result"]
    assert [u["update_id"] for u in first] == ids
    assert [u["update_id"] for u in again] == ids[1:]
    assert after == [] and server.pending_updates() == []


def test_get_updates_honours_limit_and_negative_offset(server: FakeBotApi) -> None:
    ids = [server.push_update({"message": {"message_id": n}}) for n in range(5)]
    limited = call(server.base_url, "getUpdates", {"limit": 2})[1]["result"]
    tail = call(server.base_url, "getUpdates", {"offset": -1})[1]["result"]
    assert [u["update_id"] for u in limited] == ids[:2]
    assert [u["update_id"] for u in tail] == ids[-1:]


def test_allowed_updates_filters_and_persists_until_changed(server: FakeBotApi) -> None:
    server.push_fixture("my_chat_member_blocked.json")
    server.push_fixture("callback_private.json")
    only_callbacks = {"allowed_updates": ["callback_query"]}
    filtered = call(server.base_url, "getUpdates", only_callbacks)[1]["result"]
    persisted = call(server.base_url, "getUpdates")[1]["result"]
    reset = call(server.base_url, "getUpdates", {"allowed_updates": []})[1]["result"]
    assert [list(u)[1] for u in filtered] == ["callback_query"]
    assert [list(u)[1] for u in persisted] == ["callback_query"]
    assert [list(u)[1] for u in reset] == ["my_chat_member", "callback_query"]


def test_long_poll_wakes_as_soon_as_an_update_is_pushed(server: FakeBotApi) -> None:
    threading.Timer(0.2, server.push_fixture, ("message_plain_text.json",)).start()
    started = time.monotonic()
    updates = call(server.base_url, "getUpdates", {"timeout": 10})[1]["result"]
    assert len(updates) == 1
    assert time.monotonic() - started < 3


def test_long_poll_answers_empty_after_its_timeout(server: FakeBotApi) -> None:
    started = time.monotonic()
    assert call(server.base_url, "getUpdates", {"timeout": 0.3})[1]["result"] == []
    assert 0.25 <= time.monotonic() - started < 3


def test_overlapping_get_updates_is_recorded_and_terminates_the_older_poll(
    server: FakeBotApi,
) -> None:
    results: list[tuple[int, dict[str, Any]]] = []
    older = threading.Thread(
        target=lambda: results.append(call(server.base_url, "getUpdates", {"timeout": 5}))
    )
    older.start()
    assert server.wait_received("getUpdates", 1)
    threading.Timer(0.3, server.push_fixture, ("message_plain_text.json",)).start()
    newer = call(server.base_url, "getUpdates", {"timeout": 5})
    older.join(5)
    assert results == [(409, {"ok": False, "error_code": 409, "description": DESC_CONFLICT_POLL})]
    assert len(newer[1]["result"]) == 1
    [overlap] = server.overlaps()
    assert (overlap.earlier_seq, overlap.later_seq) == (1, 2)


def test_sequential_polls_are_not_overlaps(server: FakeBotApi) -> None:
    for _ in range(3):
        call(server.base_url, "getUpdates", {"timeout": 0})
    assert server.overlaps() == []
    first, second = server.requests("getUpdates")[:2]
    assert first.ended_at is not None and first.ended_at <= second.started_at


# --------------------------------------------------------------------------- faults


def test_a_fault_applies_the_given_number_of_times_then_normal_service_resumes(
    server: FakeBotApi,
) -> None:
    server.inject("getMe", Fault.too_many_requests(retry_after=3, times=2))
    codes = [call(server.base_url, "getMe")[0] for _ in range(3)]
    assert codes == [429, 429, 200]
    assert call(server.base_url, "getMe")[1]["result"]["is_bot"] is True
    assert [r.fault for r in server.requests("getMe")] == ["respond", "respond", None, None]


def test_any_method_faults_apply_to_every_method(server: FakeBotApi) -> None:
    server.inject("*", Fault.canned(BotError.BLOCKED))
    assert call(server.base_url, "sendMessage", {"chat_id": 1, "text": "x"})[1] == {
        "ok": False,
        "error_code": 403,
        "description": "Forbidden: bot was blocked by the user",
    }


def test_migrated_fault_carries_the_new_chat_id(server: FakeBotApi) -> None:
    server.inject("sendMessage", Fault.migrated(-1001987654321))
    body = call(server.base_url, "sendMessage", {"chat_id": -42, "text": "x"})[1]
    assert body["parameters"] == {"migrate_to_chat_id": -1001987654321}
    assert body == load_fixture(FIXTURES / "response_error_migrated.json")


def test_a_held_request_is_observable_before_it_is_released(server: FakeBotApi) -> None:
    server.inject("sendMessage", Fault.hang())
    results: list[tuple[int, dict[str, Any]]] = []
    sender = threading.Thread(
        target=lambda: results.append(
            call(server.base_url, "sendMessage", {"chat_id": 1, "text": "x"})
        )
    )
    sender.start()
    assert server.wait_received("sendMessage", 1, timeout=5)
    [held] = server.requests("sendMessage")
    assert held.ended_at is None and held.fault == "hang"
    server.release()
    sender.join(5)
    assert results[0][0] == 200
    assert server.requests("sendMessage")[0].status == 200


def test_closing_the_server_drops_held_requests(server: FakeBotApi) -> None:
    server.inject("sendMessage", Fault.hang())
    errors: list[BaseException] = []

    def send() -> None:
        try:
            call(server.base_url, "sendMessage", {"chat_id": 1, "text": "x"})
        except OSError as exc:  # urllib's "Remote end closed connection"
            errors.append(exc)

    sender = threading.Thread(target=send)
    sender.start()
    assert server.wait_received("sendMessage")
    server.close()
    sender.join(5)
    assert len(errors) == 1 and not sender.is_alive()


def test_refused_connections_fail_at_connect_until_accepted_again(server: FakeBotApi) -> None:
    with server.refusing(), pytest.raises(urllib.error.URLError) as raised:
        call(server.base_url, "getMe", timeout=2)
    assert isinstance(raised.value.reason, ConnectionRefusedError)
    assert call(server.base_url, "getMe")[0] == 200
    assert len(server.requests("getMe")) == 1


# --------------------------------------------------------------------------- out of process


def test_out_of_process_server_is_driven_through_its_control_endpoint(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    with FakeBotApiProcess(
        token_file, fixtures_dir=FIXTURES, push=["callback_private.json"]
    ) as proc:
        control = proc.control
        assert isinstance(control, RemoteFakeBotApi)
        control.push_fixture("reply_to_prompt.json")
        control.inject("sendMessage", Fault.canned(BotError.CHAT_NOT_FOUND))
        updates = call(proc.base_url, "getUpdates")[1]["result"]
        rejected = call(proc.base_url, "sendMessage", {"chat_id": 1, "text": "x"})
        assert control.wait_received("sendMessage", 1, timeout=2)
        [recorded] = control.requests("sendMessage")
        overlaps = control.overlaps()
    assert [list(u)[1] for u in updates] == ["callback_query", "message"]
    assert rejected[1]["description"] == "Bad Request: chat not found"
    assert (recorded.fields, recorded.status) == ({"chat_id": "1", "text": "x"}, 400)
    assert overlaps == []


def test_out_of_process_server_reports_a_missing_token_file(tmp_path: Path) -> None:
    process = FakeBotApiProcess(tmp_path / "missing", start_timeout=5)
    with pytest.raises(RuntimeError, match="did not report its URL"):
        process.start()


# --------------------------------------------------------------------------- fixtures


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.name)
def test_fixture_files_are_compact_json_with_escaped_non_ascii(path: Path) -> None:
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    text = raw.decode("ascii")  # non-ASCII must be \u-escaped, as Telegram sends it
    compact = json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=True)
    assert compact == text.rstrip("\n")


@pytest.mark.parametrize("path", UPDATE_FIXTURES, ids=lambda p: p.name)
def test_update_fixtures_parse_as_ptb_updates(path: Path) -> None:
    for data in fixture_updates(path):
        update = Update.de_json(data, None)
        assert update is not None and update.update_id == data["update_id"]
        assert update.effective_chat is not None or update.callback_query is not None


def test_fixtures_keep_unknown_fields_visible_to_ptb() -> None:
    [callback] = fixture_updates(FIXTURES / "callback_private.json")
    [reply] = fixture_updates(FIXTURES / "reply_to_prompt.json")
    callback_query = Update.de_json(callback, None).callback_query
    message = Update.de_json(reply, None).message
    assert callback_query is not None and "x_future_field" in callback_query.api_kwargs
    assert message is not None and "x_future_field" in message.api_kwargs
    assert message.reply_to_message is not None
    assert message.reply_to_message.message_id == 43
    assert message.text is not None and message.text.endswith("trailing spaces  ")


def test_inaccessible_message_callback_parses_as_not_accessible() -> None:
    [data] = fixture_updates(FIXTURES / "callback_inaccessible_message.json")
    query = Update.de_json(data, None).callback_query
    assert query is not None and query.message is not None
    assert data["callback_query"]["message"] == {
        "chat": data["callback_query"]["message"]["chat"],
        "message_id": 17,
        "date": 0,
    }
    assert query.message.is_accessible is False


def test_forum_topic_fixture_carries_thread_fields() -> None:
    [data] = fixture_updates(FIXTURES / "callback_forum_topic.json")
    message = data["callback_query"]["message"]
    assert (message["message_thread_id"], message["is_topic_message"]) == (77, True)
    assert message["chat"]["is_forum"] is True and message["chat"]["id"] < -1_000_000_000_000


@pytest.mark.parametrize("path", RESPONSE_FIXTURES, ids=lambda p: p.name)
def test_response_fixtures_have_the_bot_api_envelope(path: Path) -> None:
    body = load_fixture(path)
    if body["ok"]:
        assert set(body) == {"ok", "result"}
    else:
        assert isinstance(body["error_code"], int) and isinstance(body["description"], str)


def test_demo_templates_fill_every_placeholder_and_parse() -> None:
    values = {
        "update_id": 1, "date": 1787097600, "callback_query_id": "9", "bot_id": 7000000001,
        "bot_username": "piw_decisions_bot", "user_id": 5123456789, "chat_id": 5123456789,
        "message_id": 42, "message_text": "Decision", "callback_data": "piw:bb71a7217a559dedb6a26f4e",
        "prompt_message_id": 43, "prompt_text": "What should change?", "reply_text": "Ä 🚀",
    }  # fmt: skip
    assert demo_fixture_names() == ["callback_press.json", "reply_to_prompt.json"]
    press = Update.de_json(load_demo_fixture("callback_press.json", values)["result"][0], None)
    reply = Update.de_json(load_demo_fixture("reply_to_prompt.json", values)["result"][0], None)
    assert press.callback_query is not None
    assert press.callback_query.data == "piw:bb71a7217a559dedb6a26f4e"
    assert reply.message is not None and reply.message.reply_to_message is not None
    assert (reply.message.text, reply.message.reply_to_message.message_id) == ("Ä 🚀", 43)


def test_unfilled_placeholders_are_named_in_the_error() -> None:
    with pytest.raises(
        FixtureError, match="bot_username, callback_data, callback_query_id, chat_id"
    ):
        load_demo_fixture("callback_press.json", {"user_id": 1, "message_id": 2})


def test_push_fixture_fills_ids_and_dates_and_renumbers(server: FakeBotApi) -> None:
    values = {
        "user_id": 5,
        "chat_id": 5,
        "message_id": 10,
        "message_text": "m",
        "callback_data": "d",
    }
    first = server.push_fixture("callback_press.json", values)
    second = server.push_fixture("callback_private.json")
    [press, recorded] = server.pending_updates()
    assert second[0] == first[0] + 1
    assert press["callback_query"]["from"]["id"] == 5
    assert press["callback_query"]["message"]["from"]["id"] == 7000000001
    assert abs(press["callback_query"]["message"]["date"] - time.time()) < 60
    assert recorded["update_id"] == second[0]
