"""Channel tests: the real poll cycle against the loopback fake Bot API, in-process.

Covers the plan's channel tests (cursors, duplicate callbacks and replies, splitting, delivery
and settlement receipts, lease handoff, missing profiles, ambiguous outcomes) and the inbound
and outbound rules of the Telegram issue.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from adapters.cli import telegram as telegram_cli
from adapters.telegram.fake import BotError, FakeBotApi, Fault
from channels import inbox, store
from channels.config.install import install_telegram_profile
from channels.config.loading import load_config
from channels.decisions import records, views, workflows
from channels.decisions.choices import text_input
from channels.decisions.presentation import fingerprint
from channels.telegram import alerts, identity, inbound, poll, reservations
from channels.telegram.buttons import callback_token
from state.database import Database
from tests.channels.telegram.helpers import is_outcome, settled_labels
from tests.conftest import child_env
from tests.paths import ROOT
from tests.shifted_clock import ShiftedClock

TOKEN = "424242:channel-test-token_abcdefghijklmnop"
USER, CHAT, CHAT2, STRANGER = 5123456789, 5123456789, -1001987654321, 999
CHANNEL = store.telegram_channel_id("default")


@dataclass
class Flow:
    home: Path
    server: FakeBotApi
    db: Database
    reports: list[poll.ChannelReport] = field(default_factory=list)

    def poll(self, **options: Any) -> poll.ChannelReport:
        config = load_config()
        assert config is not None
        self.reports = asyncio.run(poll.poll(self.db, config, telegram_cli.bot_api,
                                               poll.PollOptions(**options)))
        return self.reports[0]

    def ask(self, *, title: str = "Approve?", blocks: list[dict[str, Any]] | None = None,
            timeout_ms: int | None = None, audience: str = "operator"
            ) -> workflows.AskHandle:
        spec = workflows.AskSpec(
            title=title, audience=audience, timeout_ms=timeout_ms,
            presentation={"schema": "pi-workflows.decision-presentation.v1",
                          "summary": "Review it.", "blocks": blocks or []},
            choices={"continue": {"label": "Continue"}, "stop": {"label": "Stop"},
                     "replan": {"label": "Replan",
                                "input": text_input("text", "What should change?", 1, 50)}})
        handle = workflows.create_ask(self.db, spec, "owner")
        workflows.release_run(self.db, handle.run.lease)
        return handle

    def sends(self) -> list[dict[str, Any]]:
        return [r.params for r in self.server.requests("sendMessage")]

    def press(self, handle: workflows.AskHandle, choice: str, *, user: int = USER,
              chat: int = CHAT, message_id: int | None = None, data: str | None = None,
              callback_id: str | None = None) -> int:
        if message_id is None:
            message_id = int(self.server.sent_messages(chat)[-1]["message_id"])
        values: dict[str, Any] = {
            "user_id": user, "chat_id": chat, "message_id": message_id, "message_text": "x",
            "callback_data": data or callback_token(handle.decision_id,
                                                    handle.request.request_digest, choice)}
        if callback_id:
            values["callback_query_id"] = callback_id
        return self.server.push_fixture("callback_press.json", values)[0]

    def reply(self, text: str, *, prompt_message_id: int, message_id: int, user: int = USER,
              chat: int = CHAT) -> int:
        return self.server.push_fixture("reply_to_prompt.json", {
            "user_id": user, "chat_id": chat, "message_id": message_id,
            "prompt_message_id": prompt_message_id, "prompt_text": "p", "reply_text": text})[0]

    def rows(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.db.conn.execute(sql, params)]

    def inbox(self) -> dict[str, Any]:
        return {eid: inbox.inbox_result(self.db.conn, CHANNEL, eid)
                for (eid,) in self.rows("SELECT external_event_id FROM channel_inbox")}

    def view(self, handle: workflows.AskHandle) -> views.DecisionView:
        return self.db.read(lambda c: views.view(c, handle.decision_id))

    def effect_statuses(self, effect_type: str) -> list[str]:
        return [str(s) for (s,) in self.rows(
            "SELECT status FROM effects WHERE effect_type = ? ORDER BY created_at", effect_type)]


def _configure(home: Path, url: str, chats: list[str]) -> None:
    token_file = home / "bot.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    install_telegram_profile(home / ".config/pi-workflows", token_file=token_file,
                             user_ids=[str(USER)], chat_ids=chats, api_base_url=url)


@pytest.fixture
def flow(home: Path) -> Iterator[Flow]:
    with FakeBotApi(token=TOKEN) as server:
        _configure(home, server.base_url, [str(CHAT)])
        with Database.open_writer(clock=ShiftedClock(0)) as db:
            yield Flow(home, server, db)


@pytest.fixture
def flow2(home: Path) -> Iterator[Flow]:
    """Two allowlisted chats: a private chat and a supergroup."""
    with FakeBotApi(token=TOKEN) as server:
        _configure(home, server.base_url, [str(CHAT), str(CHAT2)])
        with Database.open_writer() as db:
            yield Flow(home, server, db)


# -- delivery ----------------------------------------------------------------------------------


def test_delivery_sends_every_part_in_order_with_the_keyboard_on_the_last(flow: Flow) -> None:
    long = [{"kind": "paragraph", "text": "Readable line.\n" * 700}]
    handle = flow.ask(blocks=long)
    flow.poll()
    sends = flow.sends()
    # The card is ours, not the reference's `Part n/N` layout: title first, parts marked 1/3.
    assert [s["text"].split("\n")[0] for s in sends] == ["Approve?", "2/3", "3/3"]
    assert sends[0]["text"].endswith("\n\n1/3")
    assert all(len(s["text"].encode("utf-16-le")) // 2 <= 4096 for s in sends)
    assert [("reply_markup" in s) for s in sends] == [False, False, True]
    assert [s.get("disable_notification") for s in sends] == [None, "true", "true"]
    buttons = [row[0]["callback_data"] for row in sends[-1]["reply_markup"]["inline_keyboard"]]
    assert buttons == [callback_token(handle.decision_id, handle.request.request_digest, c)
                       for c in ("continue", "stop", "replan")]
    assert all(s["chat_id"] == str(CHAT) for s in sends)
    # Receipts: every part row carries its references; the message and effect are settled.
    parts = flow.rows("SELECT recipient_index, part_index, external_conversation_ref,"
                      " external_message_ref FROM channel_message_parts ORDER BY part_index")
    assert [(r, p, c) for r, p, c, _ in parts] == [(0, i, str(CHAT)) for i in range(3)]
    assert all(m is not None for *_, m in parts)
    assert flow.rows("SELECT purpose, status FROM channel_messages") == [("delivery", "confirmed")]
    assert flow.effect_statuses("telegram.deliver") == ["applied"]


def test_a_second_poll_never_sends_a_delivered_decision_again(flow: Flow) -> None:
    flow.ask()
    flow.poll()
    flow.poll()
    assert len(flow.sends()) == 1


def test_every_allowlisted_chat_gets_every_part(flow2: Flow) -> None:
    flow2.ask(blocks=[{"kind": "paragraph", "text": "x " * 3000}])
    flow2.poll()
    chats = [s["chat_id"] for s in flow2.sends()]
    assert chats.count(str(CHAT)) == chats.count(str(CHAT2)) == 2


def test_a_blocked_recipient_is_rejected_and_the_others_still_get_it(flow2: Flow) -> None:
    flow2.ask()
    flow2.server.inject("sendMessage", Fault.canned(BotError.BLOCKED))
    flow2.poll()
    result = flow2.rows("SELECT r.content FROM effects e JOIN blobs r"
                        " ON r.blob_hash = e.result_hash WHERE e.effect_type='telegram.deliver'")
    recipients = json.loads(result[0][0])["recipients"]
    assert [r["status"] for r in recipients] == ["rejected", "confirmed"]
    assert recipients[0]["errorCode"] == 403
    assert flow2.effect_statuses("telegram.deliver") == ["applied"]
    assert flow2.rows("SELECT count(*) FROM channel_message_parts") == [(1,)]


def test_chat_not_found_everywhere_fails_the_delivery_with_a_clear_status(flow: Flow) -> None:
    flow.ask()
    flow.server.inject("sendMessage", Fault.canned(BotError.CHAT_NOT_FOUND))
    flow.poll()
    assert flow.effect_statuses("telegram.deliver") == ["rejected"]
    assert flow.rows("SELECT status FROM channel_messages") == [("failed",)]
    assert flow.rows("SELECT count(*) FROM channel_message_parts") == [(0,)]  # provably unsent


def test_a_migrated_chat_is_reported_with_its_new_id_and_not_guessed(flow: Flow) -> None:
    flow.ask()
    flow.server.inject("sendMessage", Fault.migrated(-1009999))
    flow.poll()
    result = flow.rows("SELECT r.content FROM effects e JOIN blobs r"
                       " ON r.blob_hash = e.result_hash WHERE e.effect_type='telegram.deliver'")
    assert json.loads(result[0][0])["recipients"][0]["migrateToChatId"] == -1009999
    assert all(s["chat_id"] == str(CHAT) for s in flow.sends())  # nothing sent to the new id


def test_429_reschedules_the_delivery_after_retry_after(flow: Flow) -> None:
    flow.ask()
    flow.server.inject("sendMessage", Fault.too_many_requests(30, times=3))
    flow.poll()
    assert flow.effect_statuses("telegram.deliver") == ["pending"]
    next_at = flow.rows("SELECT next_attempt_at - updated_at FROM effects"
                        " WHERE effect_type='telegram.deliver'")[0][0]
    assert 29_000 <= next_at <= 30_000  # retry_after 30 s, measured from the attempt
    assert flow.rows("SELECT count(*) FROM channel_message_parts") == [(0,)]


def test_a_dropped_connection_makes_the_part_ambiguous_and_it_is_never_resent(flow: Flow) -> None:
    handle = flow.ask()
    flow.server.inject("sendMessage", Fault.drop())
    flow.poll()
    assert flow.effect_statuses("telegram.deliver") == ["ambiguous"]
    assert flow.rows("SELECT external_message_ref FROM channel_message_parts") == [(None,)]
    assert flow.rows("SELECT status FROM channel_messages") == [("ambiguous",)]
    flow.poll()
    flow.poll()
    assert len(flow.sends()) == 1  # the one that may have arrived; never repeated blindly
    assert flow.view(handle).status == "open"


def test_ok_without_a_message_is_ambiguous_too(flow: Flow) -> None:
    flow.ask()
    flow.server.inject("sendMessage", Fault.ok_result({}))
    flow.poll()
    assert flow.effect_statuses("telegram.deliver") == ["ambiguous"]


def test_refused_connections_are_not_sent_and_retried_later(flow: Flow) -> None:
    flow.ask()
    with flow.server.refusing():
        flow.poll()
    assert flow.effect_statuses("telegram.deliver") == ["pending"]
    assert flow.rows("SELECT count(*) FROM channel_message_parts") == [(0,)]
    flow.db.conn.execute("UPDATE effects SET next_attempt_at = 0")
    flow.poll()
    assert flow.effect_statuses("telegram.deliver") == ["applied"]
    assert len(flow.sends()) == 1


def test_a_press_on_an_ambiguous_delivery_reconciles_that_part(flow: Flow) -> None:
    handle = flow.ask()
    flow.server.inject("sendMessage", Fault.drop())
    flow.poll()
    # The message did arrive as message 777 (only its response was lost); a press proves it.
    flow.press(handle, "continue", message_id=777)
    flow.poll()
    refs = flow.rows("SELECT p.external_conversation_ref, p.external_message_ref"
                     " FROM channel_message_parts p JOIN channel_messages m USING (message_id)"
                     " WHERE m.purpose = 'delivery'")
    assert refs == [(str(CHAT), "777")]
    assert flow.view(handle).status == "accepted"


def test_operator_resend_sends_the_ambiguous_part_again_once(flow: Flow) -> None:
    handle = flow.ask()
    flow.server.inject("sendMessage", Fault.drop())
    flow.poll()
    from state.resources import Actor

    channel = identity.Channel(load_config().profile("default"), load_config())  # type: ignore[union-attr]
    flow.db.write(lambda c: reservations.reserve_resend(
        c, channel, handle.decision_id, Actor("control", "op"), flow.db.clock.now_ms()))
    flow.poll()
    assert len(flow.sends()) == 2
    assert flow.rows("SELECT status FROM channel_messages") == [("confirmed",)]
    assert flow.effect_statuses("telegram.deliver") == ["ambiguous", "applied"]


# -- inbound -----------------------------------------------------------------------------------


def test_a_button_press_resolves_and_is_answered(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    update = flow.press(handle, "continue", callback_id="cb-1")
    flow.poll()
    assert flow.view(handle).choice == "continue"
    assert flow.inbox()[str(update)]["result"] == "won"
    answers = [r.params for r in flow.server.requests("answerCallbackQuery")]
    assert answers == [{"callback_query_id": "cb-1", "text": "Accepted: Continue"}]
    assert flow.rows("SELECT channel, actor_id, idempotency_key FROM human_decision_resolutions") \
        == [("telegram:default", f"telegram-user:{USER}", "telegram:default:callback:cb-1")]


def test_duplicate_callbacks_resolve_once(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    first = flow.press(handle, "continue", callback_id="cb-1")
    second = flow.press(handle, "stop", callback_id="cb-2")
    flow.poll()
    results = flow.inbox()
    assert (results[str(first)]["result"], results[str(second)]["result"]) == (
        "won", "already_resolved")
    assert flow.rows("SELECT count(*) FROM human_decision_resolutions") == [(1,)]
    texts = [r.params["text"] for r in flow.server.requests("answerCallbackQuery")]
    # The late press is told what won and who chose it (the fixture's user is Ada).
    # Answers go out concurrently after the batch commit: their order on the wire may vary.
    assert sorted(texts) == ["Accepted: Continue", "Already decided: Continue, by Ada"]


def test_the_same_update_delivered_twice_is_ingested_once(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    update_id = flow.press(handle, "continue", callback_id="cb-1")
    # Telegram re-sends an unconfirmed update: same update_id, same callback.
    flow.server.push_fixture("callback_press.json", {
        "update_id": update_id, "callback_query_id": "cb-1", "user_id": USER, "chat_id": CHAT,
        "message_id": 1, "message_text": "x",
        "callback_data": callback_token(handle.decision_id, handle.request.request_digest,
                                        "continue")}, renumber=False)
    flow.poll()
    assert flow.rows("SELECT count(*) FROM channel_inbox") == [(1,)]
    assert flow.rows("SELECT count(*) FROM human_decision_submissions") == [(1,)]


def test_cursor_is_last_update_plus_one_and_confirms_the_batch(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    ids = [flow.press(handle, "stop", callback_id=f"cb-{i}") for i in range(3)]
    flow.poll()
    assert store.cursor(flow.db.conn, CHANNEL, "telegram_update") == str(max(ids) + 1)
    flow.poll()
    offsets = [r.params.get("offset") for r in flow.server.requests("getUpdates")]
    assert int(offsets[-1]) == max(ids) + 1
    assert flow.server.pending_updates() == []


def test_a_press_from_a_stranger_or_another_chat_is_ignored_with_a_reason(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    stranger = flow.press(handle, "continue", user=STRANGER, callback_id="s")
    other_chat = flow.press(handle, "continue", chat=CHAT2, callback_id="o", message_id=1)
    flow.poll()
    results = flow.inbox()
    assert results[str(stranger)] == {"result": "ignored:not_allowed"}
    assert results[str(other_chat)] == {"result": "ignored:not_allowed"}
    assert flow.view(handle).status == "open"


def test_forged_callback_data_is_ignored(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    forged = flow.press(handle, "continue", data="piw:000000000000000000000000", callback_id="f")
    junk = flow.press(handle, "continue", data="drop table", callback_id="j")
    flow.poll()
    assert flow.inbox()[str(forged)] == {"result": "ignored:unknown_button"}
    assert flow.inbox()[str(junk)] == {"result": "ignored:unknown_button"}
    assert flow.rows("SELECT count(*) FROM human_decision_submissions") == [(0,)]


@pytest.mark.parametrize("fixture", ["edited_message.json"])
def test_update_types_outside_allowed_updates_are_never_fetched(flow: Flow, fixture: str) -> None:
    flow.server.push_fixture(ROOT / "tests/fixtures/telegram" / fixture)
    flow.poll()
    allowed = flow.server.requests("getUpdates")[0].params["allowed_updates"]
    assert allowed == ["message", "callback_query", "my_chat_member"]
    assert flow.rows("SELECT count(*) FROM channel_inbox") == [(0,)]


def test_a_user_blocking_the_bot_is_recorded_as_bot_removed(flow: Flow) -> None:
    [update_id] = flow.server.push_fixture(ROOT / "tests/fixtures/telegram"
                                           / "my_chat_member_blocked.json")
    flow.poll()
    assert flow.inbox()[str(update_id)] == {"result": "ignored:bot_removed", "chatId": USER}


@pytest.mark.parametrize(
    ("fixture", "reason"),
    [("message_plain_text.json", "ignored:plain_message"),
     # In a forum topic every message replies to the topic's first message: not a prompt.
     ("message_forum_topic.json", "ignored:not_allowed")],
)
def test_plain_messages_are_processed_as_ignored(flow: Flow, fixture: str, reason: str) -> None:
    ids = flow.server.push_fixture(ROOT / "tests/fixtures/telegram" / fixture)
    flow.poll()
    assert [flow.inbox()[str(i)]["result"] for i in ids] == [reason] * len(ids)
    assert flow.rows("SELECT count(*) FROM channel_inbox WHERE processed_at IS NULL") == [(0,)]


def test_a_text_choice_sends_one_prompt_and_the_reply_is_kept_exactly(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    flow.press(handle, "replan", callback_id="a")
    flow.poll()
    flow.press(handle, "replan", callback_id="b", message_id=1)  # a second press reuses it
    flow.poll()
    prompts = [s for s in flow.sends() if s.get("reply_markup", {}).get("force_reply")]
    assert len(prompts) == 1
    fp = fingerprint(handle.request.presentation_digest)
    assert prompts[0]["text"] == f"Replan: What should change?\nDecision {fp}"
    assert prompts[0]["reply_markup"] == {"force_reply": True, "selective": True}
    card = int(flow.server.sent_messages(CHAT)[0]["message_id"])
    assert prompts[0]["reply_parameters"] == {"message_id": card,
                                              "allow_sending_without_reply": True}
    prompt_id = int(flow.server.sent_messages(CHAT)[-1]["message_id"])
    text = "  Bitte prüfe die Größe 🚀\n  keep spaces  "
    flow.reply(text, prompt_message_id=prompt_id, message_id=prompt_id + 1)
    flow.poll()
    view = flow.view(handle)
    assert (view.choice, view.input) == ("replan", {"text": text})


def test_duplicate_replies_resolve_once(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    flow.press(handle, "replan")
    flow.poll()
    prompt_id = int(flow.server.sent_messages(CHAT)[-1]["message_id"])
    first = flow.reply("first", prompt_message_id=prompt_id, message_id=prompt_id + 1)
    second = flow.reply("second", prompt_message_id=prompt_id, message_id=prompt_id + 2)
    flow.poll()
    results = flow.inbox()
    assert (results[str(first)]["result"], results[str(second)]["result"]) == (
        "won", "already_resolved")
    assert flow.view(handle).input == {"text": "first"}


def test_a_reply_that_breaks_the_length_rule_is_rejected_and_a_valid_one_then_wins(
    flow: Flow,
) -> None:
    handle = flow.ask()
    flow.poll()
    flow.press(handle, "replan")
    flow.poll()
    prompt_id = int(flow.server.sent_messages(CHAT)[-1]["message_id"])
    long = flow.reply("x" * 51, prompt_message_id=prompt_id, message_id=prompt_id + 1)
    ok = flow.reply("fine", prompt_message_id=prompt_id, message_id=prompt_id + 2)
    flow.poll()
    assert flow.inbox()[str(long)]["result"] == "rejected"
    assert flow.inbox()[str(ok)]["result"] == "won"


def test_an_unbound_reply_is_ignored(flow: Flow) -> None:
    flow.ask()
    flow.poll()
    update = flow.reply("hello", prompt_message_id=424242, message_id=5)
    flow.poll()
    assert flow.inbox()[str(update)] == {"result": "ignored:unbound_reply"}


def test_a_press_after_the_deadline_is_answered_as_expired(flow: Flow) -> None:
    handle = flow.ask(timeout_ms=60_000)
    flow.poll()
    # The deadline passes on the database's clock, not by sleeping: a loaded machine once took
    # longer than a short real deadline to deliver the card at all.
    assert isinstance(flow.db.clock, ShiftedClock)
    flow.db.clock.offset_ms += 61_000
    update = flow.press(handle, "continue")
    flow.poll()
    # The poll's expire step resolves it first (no default: expired), then the press is late.
    assert flow.inbox()[str(update)]["result"] == "already_resolved"
    assert flow.view(handle).reason == "expired"


def test_a_decision_whose_audience_does_not_route_to_telegram_is_not_delivered(
    flow: Flow,
) -> None:
    flow.ask(audience="elsewhere")
    flow.poll()
    assert flow.sends() == []


# -- settlement --------------------------------------------------------------------------------


def test_settlement_removes_every_keyboard_and_posts_the_outcome_once(flow2: Flow) -> None:
    handle = flow2.ask()
    flow2.poll()
    flow2.press(handle, "stop")
    flow2.poll()  # resolves and applies the settlement in the same pass
    edits = [r.params for r in flow2.server.requests("editMessageReplyMarkup")]
    assert sorted(e["chat_id"] for e in edits) == sorted([str(CHAT), str(CHAT2)])
    # Each card keeps its buttons, the chosen one marked, all inert (no live token).
    assert all(settled_labels(e["reply_markup"]["inline_keyboard"]) == [
        "Continue", "✓ Stop", "Replan"] for e in edits)
    outcomes = [s for s in flow2.sends() if is_outcome(s["text"], "Stop", "Approve?")]
    assert len(outcomes) == 2
    cards = {str(c): int(flow2.server.sent_messages(c)[0]["message_id"]) for c in (CHAT, CHAT2)}
    assert all(s["reply_parameters"]["message_id"] == cards[s["chat_id"]] for s in outcomes)
    assert flow2.effect_statuses("telegram.settle") == ["applied"]
    flow2.poll()
    assert len(flow2.server.requests("editMessageReplyMarkup")) == 2


@pytest.mark.parametrize(
    "fault", [Fault.canned(BotError.NOT_MODIFIED), Fault.canned(BotError.EDIT_NOT_FOUND)]
)
def test_not_modified_and_not_found_count_as_settled(flow: Flow, fault: Fault) -> None:
    handle = flow.ask()
    flow.poll()
    flow.press(handle, "continue")
    flow.server.inject("editMessageReplyMarkup", fault)
    flow.poll()
    assert flow.effect_statuses("telegram.settle") == ["applied"]


def test_a_settlement_refused_for_good_ends_at_its_first_attempt_and_is_reported(
    flow: Flow,
) -> None:
    handle = flow.ask()
    flow.poll()
    flow.press(handle, "continue")
    flow.server.inject("editMessageReplyMarkup",
                       Fault.error(400, "Bad Request: something else", times=10))
    report = flow.poll()
    assert [r["decisionId"] for r in report.refused] == [handle.decision_id]
    assert report.refused[0]["refused"][0]["description"] == "Bad Request: something else"
    for _ in range(2):
        flow.db.conn.execute("UPDATE effects SET next_attempt_at = 0 WHERE status = 'pending'")
        assert flow.poll().refused == []  # reported once, on the pass where it happened
    assert flow.effect_statuses("telegram.settle") == ["rejected"]
    assert flow.rows("SELECT attempt_count FROM effects WHERE effect_type='telegram.settle'") \
        == [(1,)]
    assert len(flow.server.requests("editMessageReplyMarkup")) == 1


def test_a_refused_token_never_uses_up_the_settlement_attempts(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    flow.press(handle, "continue")
    flow.server.inject("editMessageReplyMarkup", Fault.error(401, "Unauthorized", times=10))
    for _ in range(4):
        flow.poll()
        flow.db.conn.execute("UPDATE effects SET next_attempt_at = 0 WHERE status = 'pending'")
    assert flow.effect_statuses("telegram.settle") == ["pending"]  # waits for the token
    flow.server.clear_faults()
    flow.poll()
    assert flow.effect_statuses("telegram.settle") == ["applied"]
    assert [r.status for r in flow.server.requests("editMessageReplyMarkup")][-1] == 200


def test_cancellation_settles_telegram_too(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    workflows.cancel_decision(flow.db, handle.decision_id, "obsolete", "op")
    flow.poll()
    [post] = [s for s in flow.sends() if s["text"].startswith("Cancelled at ")]
    assert re.fullmatch(r"Cancelled at \d\d:\d\d UTC: obsolete\nApprove\?\nDecision \w{12}",
                        post["text"])
    assert flow.effect_statuses("telegram.settle") == ["applied"]


# -- leases, conflicts, configuration ----------------------------------------------------------


def test_a_live_lease_makes_the_pass_skip_the_channel(flow: Flow) -> None:
    flow.db.write(lambda c: store.ensure_channel(c, CHANNEL, "telegram", "default", 1))
    lease = flow.db.write(lambda c: store.claim(c, CHANNEL, "someone-else",
                                                flow.db.clock.now_ms(), flow.db.entropy))
    assert flow.poll().status == "busy"
    assert flow.server.requests("getUpdates") == []

    flow.db.write(lambda c: lease.release(c, flow.db.clock.now_ms()))
    assert flow.poll().status == "polled"
    generations = flow.rows("SELECT generation, owner_type FROM leases WHERE resource_id = ?",
                            store.channel_resource(CHANNEL))
    assert generations == [(2, None)]  # handed over and released, generation kept


def test_a_409_conflict_stops_the_channel_and_names_the_fix(flow: Flow) -> None:
    flow.server.inject("getUpdates", Fault.canned(BotError.CONFLICT))
    report = flow.poll()
    assert report.status == "conflict" and "only one poller" in report.message
    flow.server.inject("getUpdates", Fault.canned(BotError.WEBHOOK_CONFLICT))
    assert "piw-channels setup telegram ... --delete-webhook" in flow.poll().message
    last = alerts.last_provider_error(flow.db.conn, CHANNEL)
    assert last is not None and last["errorCode"] == 409


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from adapters.cli.main import main; main()", *args],
                          cwd=ROOT, env=child_env(home), capture_output=True, text=True,
                          timeout=60)


def test_poll_without_configuration_gives_a_hint_and_exit_78(home: Path) -> None:
    result = cli(home, "poll")
    assert result.returncode == 78 and result.stdout == ""
    assert "setup telegram" in result.stderr and len(result.stderr.splitlines()) == 1


def test_poll_with_an_unknown_profile_exits_78(flow: Flow) -> None:
    result = cli(flow.home, "poll", "--profile", "nope")
    assert result.returncode == 78 and "nope" in result.stderr


def test_poll_cli_is_quiet_on_success_and_409_exits_75(flow: Flow) -> None:
    flow.ask()
    ok = cli(flow.home, "poll", "--once")
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "", "")
    flow.server.inject("getUpdates", Fault.canned(BotError.CONFLICT))
    conflict = cli(flow.home, "poll")
    assert conflict.returncode == 75 and "only one poller" in conflict.stderr


def test_status_shows_channels_without_private_ids(flow: Flow) -> None:
    handle = flow.ask()
    flow.server.inject("sendMessage", Fault.drop())
    flow.poll()
    result = cli(flow.home, "status", "--json")
    report = json.loads(result.stdout)
    [channel] = report["channels"]
    assert channel["adapter"] == "telegram" and channel["deliveries"] == {"ambiguous": 1}
    assert channel["lease"]["state"] == "free" and channel["lease"]["generation"] == 1
    text = result.stdout + cli(flow.home, "status").stdout
    for private in (str(USER), TOKEN, TOKEN.split(":")[1]):
        assert private not in text
    assert handle.decision_id  # the decision exists; only counts are shown


def test_a_poller_that_lost_its_lease_cannot_ingest_or_move_the_cursor(flow: Flow) -> None:
    from state.errors import StaleLease

    flow.db.write(lambda c: store.ensure_channel(c, CHANNEL, "telegram", "default", 1))
    old = flow.db.write(lambda c: store.claim(c, CHANNEL, "old", flow.db.clock.now_ms(),
                                              flow.db.entropy))
    flow.db.conn.execute("UPDATE leases SET expires_at = 0 WHERE resource_id = ?",
                         (store.channel_resource(CHANNEL),))  # the old owner stalled past TTL
    new = flow.db.write(lambda c: store.claim(c, CHANNEL, "new", flow.db.clock.now_ms(),
                                              flow.db.entropy))
    assert new.generation == old.generation + 1
    event = inbox.InboundEvent("1", "other", {"kind": "x"})
    with pytest.raises(StaleLease):
        flow.db.write(lambda c: inbox.ingest(c, old, CHANNEL, [event], flow.db.clock.now_ms(),
                                             cursor_key="telegram_update", next_cursor=2))
    assert flow.rows("SELECT count(*) FROM channel_inbox") == [(0,)]
    assert store.cursor(flow.db.conn, CHANNEL, "telegram_update") is None
    flow.db.write(lambda c: inbox.ingest(c, new, CHANNEL, [event], flow.db.clock.now_ms(),
                                         cursor_key="telegram_update", next_cursor=2))
    assert store.cursor(flow.db.conn, CHANNEL, "telegram_update") == "2"


def test_a_revoked_token_is_reported_on_stderr_with_exit_78(flow: Flow) -> None:
    flow.server.inject("getUpdates", Fault.canned(BotError.UNAUTHORIZED))
    result = cli(flow.home, "poll")
    assert result.returncode == 78
    assert "rejected the token (HTTP 401)" in result.stderr
    assert TOKEN not in result.stderr + result.stdout


def test_a_press_on_a_decision_resolved_long_ago_is_an_unknown_button(home: Path) -> None:
    import time as _time

    from state.clock import ManualClock

    clock = ManualClock(now=_time.time_ns() // 1_000_000)
    with FakeBotApi(token=TOKEN) as server:
        _configure(home, server.base_url, [str(CHAT)])
        with Database.open_writer(clock=clock) as db:
            flow = Flow(home, server, db)
            handle = flow.ask()
            flow.poll()
            flow.press(handle, "continue", callback_id="first")
            flow.poll()
            clock.advance(8 * 24 * 3600 * 1000)  # a week and a day later
            late = flow.press(handle, "stop", callback_id="late", message_id=1)
            flow.poll()
            assert flow.inbox()[str(late)] == {"result": "ignored:unknown_button"}
            assert flow.rows("SELECT count(*) FROM human_decision_submissions") == [(1,)]


def test_an_effect_that_breaks_the_worker_before_sending_fails_for_good_not_retried_forever(
    flow: Flow,
) -> None:
    from state import effects as fx
    from state.resources import SYSTEM

    handle = flow.ask()
    resource = records.decision_resource(handle.decision_id)
    flow.db.write(lambda c: fx.reserve(  # a payload without its recipients: a latent bug
        c, source_resource_id=resource, source_revision=1, effect_type="telegram.deliver",
        idempotency_key=CHANNEL, payload={"decisionId": handle.decision_id},
        owner_scope="channel", actor=SYSTEM, now=flow.db.clock.now_ms()))
    report = flow.poll()
    # Nothing was sent (no part intent): failed for good, listed until an operator resends.
    assert flow.effect_statuses("telegram.deliver") == ["rejected"]
    assert any("KeyError" in str(e.get("internal")) for e in report.errors)
    assert [f.internal and "crash report" in f.line for f in report.problems] == [True]
    flow.poll()
    assert flow.rows("SELECT attempt_count FROM effects") == [(1,)]


def test_a_row_that_breaks_processing_is_recorded_once_not_retried_forever(
    flow: Flow, monkeypatch: pytest.MonkeyPatch
) -> None:

    handle = flow.ask()
    flow.poll()
    update = flow.press(handle, "continue", callback_id="boom")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("a latent bug")

    with monkeypatch.context() as patch:
        patch.setattr(inbound, "process", broken)  # fault injection in our code
        flow.poll()
    flow.poll()
    result = flow.inbox()[str(update)]
    assert result["result"] == "ignored:error"
    assert result["message"].startswith("internal error while processing it: TypeError: a"
                                        " latent bug; crash report: ")
    assert flow.rows("SELECT count(*) FROM channel_inbox WHERE processed_at IS NULL") == [(0,)]
