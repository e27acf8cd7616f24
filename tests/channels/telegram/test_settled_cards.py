"""Issue 28, item 3: a settled card keeps its buttons (the chosen one marked, all inert), a typed
answer gets a 👍 reaction as its receipt, and a press that comes without its message is bound
by its callback data or refused with a recorded reason. The real poll cycle against the
loopback fake Bot API over HTTP.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.telegram.fake import FakeBotApi, Fault
from adapters.telegram.fake.fixtures import fixture_updates
from channels.decisions import workflows
from channels.telegram.buttons import callback_token, live_token
from channels.telegram.updates import to_event
from state.database import Database
from tests.channels.telegram.helpers import FIXTURES, live_buttons, settled_labels
from tests.channels.telegram.test_channel import CHAT, TOKEN, USER, Flow, _configure
from tests.shifted_clock import ShiftedClock

STRANGER = 9876543210


@pytest.fixture
def flow(home: Path) -> Iterator[Flow]:
    with FakeBotApi(token=TOKEN) as server:
        _configure(home, server.base_url, [str(CHAT)])
        with Database.open_writer(clock=ShiftedClock(0)) as db:
            yield Flow(home, server, db)


def card(flow: Flow) -> dict[str, Any]:
    return flow.server.sent_messages(CHAT)[0]


def keyboard(flow: Flow) -> list[list[dict[str, Any]]]:
    return list(card(flow).get("reply_markup", {}).get("inline_keyboard", []))


def press_settled(flow: Flow, handle: workflows.AskHandle, label: str, *,
                  user: int = USER) -> int:
    """Press a button of the settled card itself (the last message is the outcome post)."""
    return flow.press(handle, "x", user=user, data=settled_data(flow, label),
                      message_id=int(card(flow)["message_id"]))


def settled_data(flow: Flow, label: str) -> str:
    [data] = [b["callback_data"] for row in keyboard(flow) for b in row
              if b["text"].removeprefix("✓ ") == label]
    return str(data)


def answers(flow: Flow) -> list[str]:
    return [str(r.params.get("text")) for r in flow.server.requests("answerCallbackQuery")]


def counts(flow: Flow) -> tuple[int, ...]:
    """What a press could change: submissions, resolutions, effects, decision events (a pass
    writes its channel's own events: the lease, the cursor)."""
    return (*(flow.rows(f"SELECT count(*) FROM {t}")[0][0] for t in (
        "human_decision_submissions", "human_decision_resolutions", "effects")),
        flow.rows("SELECT count(*) FROM events WHERE resource_id LIKE 'decision:%'")[0][0])


def detached_press(flow: Flow, data: str, *, user: int = USER, inline: bool = True) -> int:
    """A press with no `message` (Bot API 10.5 callback_query_mode: `inline_message_id`)."""
    [update] = fixture_updates(FIXTURES / "callback_without_message.json")
    query = copy.deepcopy(update["callback_query"])
    query["data"], query["from"]["id"] = data, user
    query["id"] = f"44103718365920571{flow.server.pushed_updates().__len__():02d}"
    if not inline:
        query.pop("inline_message_id")
    return flow.server.push_update({"callback_query": query})


# -- settled cards -------------------------------------------------------------------------


def test_a_settled_card_keeps_its_buttons_the_chosen_one_marked_and_all_inert(
    flow: Flow,
) -> None:
    handle = flow.ask()
    flow.poll()
    flow.press(handle, "stop")
    flow.poll()
    [edit] = [r.params for r in flow.server.requests("editMessageReplyMarkup")]
    assert settled_labels(edit["reply_markup"]["inline_keyboard"]) == [
        "Continue", "✓ Stop", "Replan"]
    assert settled_labels(keyboard(flow)) == ["Continue", "✓ Stop", "Replan"]
    # The inert data is the live token under another prefix: it still names its choice.
    assert live_token(settled_data(flow, "Stop")) == callback_token(
        handle.decision_id, handle.request.request_digest, "stop")
    assert flow.effect_statuses("telegram.settle") == ["applied"]


@pytest.mark.parametrize("label", ["Stop", "Continue", "Replan"])
def test_a_press_on_a_settled_button_is_answered_already_decided_and_changes_nothing(
    flow: Flow, label: str,
) -> None:
    handle = flow.ask()
    flow.poll()
    flow.press(handle, "stop")
    flow.poll()
    before = counts(flow)
    update = press_settled(flow, handle, label)
    flow.poll()
    assert flow.inbox()[str(update)] == {"result": "ignored:settled_button",
                                         "decisionId": handle.decision_id}
    assert answers(flow)[-1] == "Already decided: Stop, by Ada"
    # No submission, no resolution, no effect, no event: only the inbox row was written.
    assert counts(flow) == before and before[3] > 0
    assert flow.view(handle).choice == "stop"
    assert len(flow.server.requests("editMessageReplyMarkup")) == 1  # nothing re-settled


def test_a_settled_button_of_a_decision_no_longer_known_is_still_refused(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    forged = "piwx:" + "0" * 24
    update = flow.press(handle, "x", data=forged)
    flow.poll()
    assert flow.inbox()[str(update)] == {"result": "ignored:settled_button"}
    assert answers(flow)[-1] == "This decision is decided."
    assert flow.view(handle).status == "open"


def test_a_stranger_pressing_a_settled_button_is_not_allowed(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    flow.press(handle, "continue")
    flow.poll()
    update = press_settled(flow, handle, "Continue", user=STRANGER)
    flow.poll()
    assert flow.inbox()[str(update)] == {"result": "ignored:not_allowed"}


def test_a_cancelled_card_marks_no_button(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    workflows.cancel_decision(flow.db, handle.decision_id, "superseded", "operator")
    flow.poll()
    assert settled_labels(keyboard(flow)) == ["Continue", "Stop", "Replan"]
    update = press_settled(flow, handle, "Continue")
    flow.poll()
    assert flow.inbox()[str(update)]["result"] == "ignored:settled_button"
    assert answers(flow)[-1] == "Already decided: cancelled (superseded)"


# -- the reaction on a typed answer ----------------------------------------------------------


def _prompt_reply(flow: Flow, handle: workflows.AskHandle, text: str) -> tuple[int, int]:
    flow.press(handle, "replan")
    flow.poll()
    prompt = int(flow.server.sent_messages(CHAT)[-1]["message_id"])
    update = flow.reply(text, prompt_message_id=prompt, message_id=prompt + 1)
    return update, prompt + 1


def test_a_typed_answer_that_wins_gets_a_thumbs_up_on_the_reply(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    update, reply = _prompt_reply(flow, handle, "use the staging db")
    flow.poll()
    assert flow.inbox()[str(update)]["result"] == "won"
    [call] = [r for r in flow.server.requests("setMessageReaction")]
    # On the wire as the Bot API takes it (form fields; the reaction list as JSON).
    assert call.params == {"chat_id": str(CHAT), "message_id": str(reply),
                           "reaction": [{"type": "emoji", "emoji": "👍"}]}
    assert call.status == 200
    assert flow.server.reactions() == {(CHAT, reply): ["👍"]}
    assert flow.effect_statuses("telegram.react") == ["applied"]
    assert settled_labels(keyboard(flow)) == ["Continue", "Stop", "✓ Replan"]
    flow.poll()  # applied once: never again
    assert len(flow.server.requests("setMessageReaction")) == 1


def test_a_late_typed_answer_gets_no_reaction_but_a_notice(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    flow.press(handle, "replan")
    flow.poll()
    prompt = int(flow.server.sent_messages(CHAT)[-1]["message_id"])
    flow.press(handle, "continue")
    flow.poll()
    flow.reply("too late", prompt_message_id=prompt, message_id=prompt + 1)
    flow.poll()
    assert flow.server.requests("setMessageReaction") == []
    assert flow.effect_statuses("telegram.react") == []
    assert flow.sends()[-1]["text"] == "Already decided: Continue, by Ada"


def test_a_refused_reaction_is_recorded_and_the_answer_stands(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    flow.server.inject("setMessageReaction",
                       Fault.error(400, "Bad Request: REACTION_INVALID"))
    update, _ = _prompt_reply(flow, handle, "fine")
    report = flow.poll()
    assert flow.inbox()[str(update)]["result"] == "won"
    assert flow.view(handle).choice == "replan"
    assert flow.effect_statuses("telegram.react") == ["rejected"]  # for good: no retry
    assert report.status == "polled" and report.exit_code == 0
    flow.poll()
    assert len(flow.server.requests("setMessageReaction")) == 1


def test_a_reaction_that_failed_on_the_server_is_tried_again(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    flow.server.inject("setMessageReaction", Fault.error(502, "Bad Gateway"))
    _, reply = _prompt_reply(flow, handle, "fine")
    flow.poll()
    assert flow.effect_statuses("telegram.react") == ["pending"]
    assert isinstance(flow.db.clock, ShiftedClock)
    flow.db.clock.offset_ms += 10_000
    flow.poll()
    assert flow.effect_statuses("telegram.react") == ["applied"]
    assert flow.server.reactions() == {(CHAT, reply): ["👍"]}


def test_the_fake_refuses_reactions_as_telegram_does(flow: Flow) -> None:
    def call(params: dict[str, Any]) -> dict[str, Any]:
        return dict(httpx.post(flow.server.method_url("setMessageReaction"), json=params).json())

    flow.ask()
    flow.poll()
    message = int(card(flow)["message_id"])
    assert call({"chat_id": CHAT, "message_id": message,
                 "reaction": [{"type": "emoji", "emoji": "🦄"}]})["description"] == \
        "Bad Request: REACTION_INVALID"
    assert call({"chat_id": CHAT, "message_id": message, "reaction": [
        {"type": "emoji", "emoji": "👍"}, {"type": "emoji", "emoji": "👀"}]})["description"] == \
        "Bad Request: REACTIONS_TOO_MANY"
    assert call({"chat_id": CHAT, "message_id": 999, "reaction": [
        {"type": "emoji", "emoji": "👍"}]})["description"] == \
        "Bad Request: message to react not found"
    assert call({"chat_id": CHAT, "message_id": message,
                 "reaction": [{"type": "emoji", "emoji": "👍"}]}) == {"ok": True, "result": True}
    assert flow.server.reactions() == {(CHAT, message): ["👍"]}
    assert call({"chat_id": CHAT, "message_id": message, "reaction": []})["ok"] is True
    assert flow.server.reactions() == {}


# -- presses without their message ---------------------------------------------------------


def test_the_fixture_press_without_a_message_has_no_chat() -> None:
    [update] = fixture_updates(FIXTURES / "callback_without_message.json")
    event = to_event(update)
    assert event.event_type == "callback" and event.payload["inline"] is True
    assert "chatId" not in event.payload and event.payload["data"].startswith("piw:")


@pytest.mark.parametrize("inline", [True, False])
def test_a_press_without_its_message_is_bound_by_its_data_and_resolves(
    flow: Flow, inline: bool,
) -> None:
    handle = flow.ask()
    flow.poll()
    update = detached_press(flow, callback_token(handle.decision_id,
                                                 handle.request.request_digest, "continue"),
                            inline=inline)
    flow.poll()
    assert flow.inbox()[str(update)] == {"result": "won", "message": "accepted",
                                         "outcome": "accepted", "boundBy": "callback_data"}
    assert flow.view(handle).choice == "continue"
    assert answers(flow)[-1] == "Accepted: Continue"
    # The card it was made on is settled like any other.
    assert settled_labels(keyboard(flow)) == ["✓ Continue", "Stop", "Replan"]


def test_a_press_without_its_message_on_a_text_choice_prompts_in_the_bound_chat(
    flow: Flow,
) -> None:
    handle = flow.ask()
    flow.poll()
    update = detached_press(flow, callback_token(handle.decision_id,
                                                 handle.request.request_digest, "replan"))
    flow.poll()
    assert flow.inbox()[str(update)] == {"result": "prompted", "choice": "replan",
                                         "boundBy": "callback_data"}
    prompt = flow.sends()[-1]
    assert prompt["chat_id"] == str(CHAT) and prompt["reply_markup"]["force_reply"] is True


@pytest.mark.parametrize(("who", "data", "reason", "text"), [
    (STRANGER, "live", "ignored:not_allowed", "You are not allowed to answer this decision."),
    (USER, "piw:ffffffffffffffffffffffff", "ignored:unknown_button",
     "This button is not valid."),
    (USER, "not ours", "ignored:unknown_button", "This button is not valid."),
    (USER, "piwx:ffffffffffffffffffffffff", "ignored:settled_button",
     "This decision is decided."),
])
def test_a_press_without_its_message_that_cannot_be_bound_is_refused_with_a_reason(
    flow: Flow, who: int, data: str, reason: str, text: str,
) -> None:
    handle = flow.ask()
    flow.poll()
    before = counts(flow)
    live = callback_token(handle.decision_id, handle.request.request_digest, "continue")
    update = detached_press(flow, live if data == "live" else data, user=who)
    report = flow.poll()
    assert flow.inbox()[str(update)] == {"result": reason}
    assert answers(flow)[-1] == text
    assert counts(flow)[:2] == before[:2]  # no submission, no resolution
    assert flow.view(handle).status == "open" and report.status == "polled"
    # The channel goes on: the next press on the card answers it.
    flow.press(handle, "stop")
    flow.poll()
    assert flow.view(handle).choice == "stop"


def test_a_press_without_its_message_for_a_card_never_delivered_here_is_refused(
    flow: Flow,
) -> None:
    handle = flow.ask(audience="elsewhere")  # routed to no Telegram chat: never delivered
    flow.poll()
    update = detached_press(flow, callback_token(handle.decision_id,
                                                 handle.request.request_digest, "continue"))
    flow.poll()
    assert flow.inbox()[str(update)]["result"] in ("ignored:unknown_button",
                                                   "ignored:no_message")
    assert flow.view(handle).status == "open"


def test_a_press_on_an_inaccessible_message_still_resolves(flow: Flow) -> None:
    handle = flow.ask()
    flow.poll()
    [update] = fixture_updates(FIXTURES / "callback_inaccessible_message.json")
    query = copy.deepcopy(update["callback_query"])
    query["data"] = callback_token(handle.decision_id, handle.request.request_digest, "stop")
    query["message"]["message_id"] = int(card(flow)["message_id"])
    pushed = flow.server.push_update({"callback_query": query})
    flow.poll()
    assert flow.inbox()[str(pushed)]["result"] == "won"
    assert flow.view(handle).choice == "stop"
    assert live_buttons(keyboard(flow)) == []
