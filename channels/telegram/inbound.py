"""Processing the Telegram inbox: button presses and typed replies become decision candidates.

Each row is processed exactly once, inside the caller's transaction, and unauthorised,
unbound, malformed or late events are recorded as `ignored` with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import apsw

from channels import inbox, messages, store
from channels.decisions import records, resolution, views
from channels.decisions.presentation import fingerprint
from channels.decisions.request import channel_request_document
from channels.decisions.resolution import HumanAnswer, Result, Verdict
from channels.messages import MessageStatus, Purpose
from channels.telegram import commands, documents, outcomes, presses, reactions
from channels.telegram.buttons import SETTLED_RE, TOKEN_RE, ButtonIndex, live_token
from channels.telegram.card import card_parts
from channels.telegram.identity import Channel
from channels.telegram.ignored import Ignored, ignored
from channels.telegram.limits import CALLBACK_TEXT_LIMIT
from channels.telegram.reservations import (
    PROMPT,
    SETTLE,
    delivery_recipients,
    prompts,
    reserve_notice,
)
from channels.telegram.text_answers import choice_named, hint
from channels.telegram.updates import press_field
from channels.text import utf16_len
from state import effects
from state.effects import OwnerScope
from state.leases import Lease
from state.resources import Actor

__all__ = ["FAILED_TEXT", "Processed", "failed", "process"]


@dataclass(frozen=True, slots=True)
class Processed:
    """What processing one row produced, for the caller to act on after the commit."""

    result: dict[str, Any]
    callback: tuple[str, str] | None = None  # (callback_query_id, answer text)


def process(
    conn: apsw.Connection,
    channel: Channel,
    index: ButtonIndex,
    lease: Lease,
    row: inbox.InboxRow,
    now: int,
) -> Processed:
    """Process one inbox row exactly once, inside the caller's transaction."""
    store.verify(conn, lease, channel.channel_id, now)
    if row.event_type == "callback":
        processed = _callback(conn, channel, index, row, now, lease.actor)
    elif row.event_type == "reply":
        processed = _reply(conn, channel, row, now, lease.actor)
    elif row.payload.get("kind") == "command":
        processed = _command(conn, channel, row, now, lease)
    else:
        # Extra fields (a migrated chat's new id, a chat the bot left) stay readable in the result.
        extra = {k: v for k, v in row.payload.items() if k != "kind"}
        kind = str(row.payload.get("kind", "unsupported"))
        processed = Processed({**ignored(kind), **extra})
    row.mark_processed(conn, processed.result, now)
    return processed


# The answer to a press whose processing failed (a bug, or a request this version refuses).
FAILED_TEXT = "Something went wrong; the operator has been told"


def failed(row: inbox.InboxRow, result: dict[str, Any]) -> Processed:
    """A row whose processing failed: its result, and for a press, the answer that says so."""
    if row.event_type != "callback":
        return Processed(result)
    return _answered(row.payload.get("callbackId"), result, FAILED_TEXT)



def _answered(callback_id: Any, result: dict[str, Any], text: str) -> Processed:
    # An id that is not valid Unicode (a row stored before the parser refused those) could
    # never be sent: the press is processed, and not answered.
    if not isinstance(callback_id, str) or not callback_id or not _sendable(callback_id):
        return Processed(result)
    return Processed(result, (callback_id, text[:CALLBACK_TEXT_LIMIT]))


def _sendable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _callback(
    conn: apsw.Connection,
    channel: Channel,
    index: ButtonIndex,
    row: inbox.InboxRow,
    now: int,
    worker: Actor,
) -> Processed:
    p = row.payload
    callback_id = p.get("callbackId")
    user, chat = p.get("userId"), p.get("chatId")
    detached = press_field(p, "inline") or chat is None
    if user is None:
        return _answered(callback_id, ignored(Ignored.NO_USER),
                         "This button cannot be used here.")
    if detached:  # no message came with the press: its data names the decision
        bound = presses.bind_detached(conn, channel, index, p, now)
        if isinstance(bound, presses.Refused):
            return _answered(callback_id, ignored(bound.reason), bound.text)
        p, chat = bound, bound["chatId"]
    if not channel.profile.allows(str(user), str(chat)):
        return _answered(callback_id, ignored(Ignored.NOT_ALLOWED),
                         "You are not allowed to answer this decision.")
    data = p.get("data")
    message_ref = None if detached else p.get("messageId")
    if isinstance(data, str) and SETTLED_RE.fullmatch(data):
        return _settled_press(conn, channel, index, callback_id, data, str(chat), message_ref,
                              now)
    found = index.find(conn, channel.channel_id, data, now, str(chat),
                       None if message_ref is None else str(message_ref)) \
        if isinstance(data, str) and TOKEN_RE.fullmatch(data) else None
    if found is None:
        return _answered(callback_id, ignored(Ignored.UNKNOWN_BUTTON),
                         "This button is not valid.")
    decision_id, choice_id = found
    decision = records.load(conn, decision_id)
    bound_by = {"boundBy": "callback_data"} if detached else {}
    if not detached and press_field(p, "accessible") and isinstance(p.get("messageId"), int):
        _reconcile(conn, channel, decision, str(chat), str(p["messageId"]), now, worker)
    if "input" in decision.request.choices[choice_id]:
        prompted = _prompt(conn, channel, decision, choice_id, p, now, worker)
        return Processed({**prompted.result, **bound_by}, prompted.callback)
    answer = HumanAnswer(
        decision_id=decision_id, request_digest=decision.request.request_digest,
        response={"choice": choice_id}, channel=channel.name,
        actor_id=f"telegram-user:{user}", external_event_id=row.external_event_id,
        idempotency_key=f"{channel.name}:callback:{callback_id or row.external_event_id}",
    )
    outcome = resolution.resolve(conn, answer, now, decision=decision,
                                allowed_channels=channel.config.routes(decision.audience))
    return _answered(callback_id, {**_outcome_result(outcome), **bound_by},
                     _callback_text(conn, channel, decision, outcome))


def _settled_press(conn: apsw.Connection, channel: Channel, index: ButtonIndex,
                   callback_id: Any, data: str, chat: str, message_ref: Any,
                   now: int) -> Processed:
    """A press on a settled card's button: answered with how it was decided; no candidate,
    no submission, no state but this inbox row's."""
    found = index.find(conn, channel.channel_id, live_token(data), now, chat,
                       None if message_ref is None else str(message_ref))
    if found is None:  # decided long ago (or not here): still never an answer
        return _answered(callback_id, ignored(Ignored.SETTLED_BUTTON),
                         "This decision is decided.")
    decision = records.load(conn, found[0])
    return _answered(callback_id, {**ignored(Ignored.SETTLED_BUTTON), "decisionId": found[0]},
                     outcomes.already_decided(conn, channel, decision))


def _prompt(
    conn: apsw.Connection,
    channel: Channel,
    decision: records.StoredDecision,
    choice_id: str,
    p: dict[str, Any],
    now: int,
    worker: Actor,
) -> Processed:
    """A choice that needs text: send one ForceReply prompt (a second press reuses it)."""
    winner = records.resolution_of(conn, decision.decision_id)
    if winner is not None:
        outcome = Verdict(Result.ALREADY_RESOLVED, "already resolved", winner)
        return _answered(p.get("callbackId"), _outcome_result(outcome),
                         _callback_text(conn, channel, decision, outcome))
    if decision.deadline_at is not None and now >= decision.deadline_at:
        return _answered(p.get("callbackId"), {"result": "stale"}, "This decision has expired.")
    choice = decision.request.choices[choice_id]
    chat = str(p["chatId"])
    fp = fingerprint(decision.request.presentation_digest)
    text, entities = _prompt_text(f"{choice['label']}: {choice['input']['prompt']}", p, fp)
    payload: dict[str, Any] = {
        "decisionId": decision.decision_id, "choiceId": choice_id,
        "channelId": channel.channel_id, "chatId": chat, "threadId": p.get("threadId"),
        "text": text}
    key = f"{channel.channel_id}:{chat}:{choice_id}"
    payload["entities"] = entities
    if len(entities) > 1:  # a group: the prompt names its presser, so each gets their own
        payload["presser"] = p["userId"]
        key += f":{p['userId']}"
    effects.reserve(
        conn, source_resource_id=decision.resource_id, effect_type=PROMPT,
        idempotency_key=key, payload=payload, owner_scope=OwnerScope.CHANNEL, actor=worker, now=now,
    )
    return _answered(p.get("callbackId"), {"result": "prompted", "choice": choice_id},
                     "Reply to the prompt message with your text.")


def _prompt_text(text: str, press: dict[str, Any], fp: str
                ) -> tuple[str, list[dict[str, Any]]]:
    """The prompt's text and entities, naming its decision. In a group, ForceReply's
    `selective` opens the reply box only for users mentioned in the text: the person who
    pressed is named with a text_mention (it needs no username), so the box opens for them.
    A private chat needs no mention."""
    user, chat = press.get("userId"), press.get("chatId")
    text = f"{text}\nDecision {fp}"
    code = {"type": "code", "length": len(fp)}
    if not isinstance(user, int) or not isinstance(chat, int) or chat > 0:
        return text, [{**code, "offset": utf16_len(text) - len(fp)}]
    name = press_field(press, "userName") or "You"
    mention = {"type": "text_mention", "offset": 0, "length": utf16_len(name),
               "user": {"id": user, "is_bot": False, "first_name": name}}
    text = f"{name}, {text}"
    return text, [mention, {**code, "offset": utf16_len(text) - len(fp)}]


def _reconcile(
    conn: apsw.Connection,
    channel: Channel,
    decision: records.StoredDecision,
    chat: str,
    message_ref: str,
    now: int,
    worker: Actor,
) -> None:
    """A press proves that the message it was made on (ours: only our bot's messages carry its
    buttons) reached the chat with this decision's keyboard. When that message is one we never
    learned (its send response was lost, or an operator's resend replaced it), record its
    reference, so that settlement removes its keyboard like any other."""
    card = messages.get_message(conn, messages.message_id_for(
        channel.channel_id, Purpose.DELIVERY, decision.decision_id))
    if card is None:
        return
    recipients = delivery_recipients(conn, channel, decision)
    if chat not in recipients or _known(conn, channel, decision, chat, message_ref):
        return
    recipient = recipients.index(chat)
    texts = [part.text for part in card_parts(channel_request_document(decision.request), now)]
    # The keyboard's part is the last; an attached file is one part before it.
    last = len(texts) - (documents.attachment_of(decision.request) is None)
    intents = [p for p in card.parts(conn)
               if (p.recipient_index, p.part_index) == (recipient, last) and p.is_intent]
    if intents:
        card.confirm(conn, recipient, last, chat, message_ref)
    else:  # a second copy of the last part: kept as a message of its own
        copy_id = messages.message_id_for(channel.channel_id, Purpose.DELIVERY,
                                          decision.decision_id, "copy", chat, message_ref)
        copy = messages.ensure_message(conn, copy_id, channel.channel_id, decision.decision_id,
                                       Purpose.DELIVERY, texts[-1], now)
        copy.write_intent(conn, recipient, last, texts[-1], now)
        copy.confirm(conn, recipient, last, chat, message_ref)
        copy.set_status(conn, MessageStatus.CONFIRMED, now)
    _settle_again(conn, channel, decision, f"{chat}:{message_ref}", now, worker)


def _known(conn: apsw.Connection, channel: Channel, decision: records.StoredDecision,
           chat: str, message_ref: str) -> bool:
    return any(
        (part.conversation_ref, part.message_ref) == (chat, message_ref)
        for message in messages.messages_for_decision(conn, channel.channel_id,
                                                      decision.decision_id, [Purpose.DELIVERY])
        for part in message.parts(conn))


def _settle_again(conn: apsw.Connection, channel: Channel, decision: records.StoredDecision,
                  learned: str, now: int, worker: Actor) -> None:
    """A message learned after this channel's settlement ran gets a settlement of its own
    (one that is still due reads every reference when it runs, this one included)."""
    earlier = effects.find_scoped(conn, decision.resource_id, SETTLE, channel.channel_id)
    if earlier is None:
        return  # not resolved yet (the press may resolve it), or never presented here
    if not earlier.status.settled:
        return
    effects.reserve(
        conn, source_resource_id=decision.resource_id, effect_type=SETTLE,
        idempotency_key=f"{channel.channel_id}:learned:{learned}",
        payload=earlier.payload(conn), owner_scope=OwnerScope.CHANNEL, actor=worker,
        now=now,
    )


def _reply(
    conn: apsw.Connection, channel: Channel, row: inbox.InboxRow, now: int, worker: Actor
) -> Processed:
    p = row.payload
    user, chat, reply_to = p.get("userId"), p.get("chatId"), p.get("replyTo")
    if user is None or chat is None or reply_to is None or p.get("messageId") is None:
        return Processed(ignored(Ignored.MALFORMED))
    if not channel.profile.allows(str(user), str(chat)):
        return Processed(ignored(Ignored.NOT_ALLOWED))
    prompt = messages.find_message_by_ref(conn, channel.channel_id, Purpose.PROMPT, str(chat),
                                       str(reply_to)) or _reconcile_prompt(conn, channel, p, now)
    if prompt is None or prompt.decision_id is None:
        card = messages.find_message_by_part_ref(conn, channel.channel_id, Purpose.DELIVERY,
                                                 str(chat), str(reply_to))
        if card is None or card.decision_id is None:
            return Processed(ignored(Ignored.UNBOUND_REPLY))
        return _card_reply(conn, channel, row, records.load(conn, card.decision_id), now,
                           worker)
    text = p.get("text")
    if not isinstance(text, str):
        return Processed(ignored(Ignored.NOT_TEXT))
    decision = records.load(conn, prompt.decision_id)
    choice_id = _prompted_choice(conn, channel, decision, prompt.message_id)
    if choice_id is None:
        return Processed(ignored(Ignored.UNBOUND_REPLY))
    name = decision.request.choices[choice_id]["input"]["name"]
    answer = HumanAnswer(
        decision_id=decision.decision_id, request_digest=decision.request.request_digest,
        response={"choice": choice_id, "input": {name: text}}, channel=channel.name,
        actor_id=f"telegram-user:{user}", external_event_id=row.external_event_id,
        idempotency_key=f"{channel.name}:reply:{chat}:{p['messageId']}",
    )
    outcome = resolution.resolve(conn, answer, now, decision=decision,
                                allowed_channels=channel.config.routes(decision.audience))
    if outcome.result not in (Result.WON, Result.ADOPTED):  # a reply has no spinner to answer
        reserve_notice(conn, channel, decision.decision_id, str(chat), p["messageId"],
                       _callback_text(conn, channel, decision, outcome),
                       f"reply:{chat}:{p['messageId']}", worker, now)
    else:  # the reply itself says it was taken
        reactions.reserve_receipt(conn, channel, decision.decision_id, str(chat),
                                  p["messageId"], worker, now)
    return Processed(_outcome_result(outcome))


def _card_reply(conn: apsw.Connection, channel: Channel, row: inbox.InboxRow,
                decision: records.StoredDecision, now: int, worker: Actor) -> Processed:
    """A reply to a decision's card that names a choice (its number or label) answers like
    the button; anything unclear gets a one-line hint, never a guess."""
    p = row.payload
    chat, text = str(p["chatId"]), p.get("text")

    def notice(line: str) -> None:
        reserve_notice(conn, channel, decision.decision_id, chat, p["messageId"], line,
                       f"reply:{chat}:{p['messageId']}", worker, now)

    if records.resolution_of(conn, decision.decision_id) is not None:
        notice(outcomes.already_decided(conn, channel, decision))
        return Processed({"result": "already_resolved", "by": "text"})
    choice_id = choice_named(decision.request.choices, text) if isinstance(text, str) else None
    if choice_id is None:
        notice(hint(decision.request.choices))
        return Processed(ignored(Ignored.UNCLEAR_TEXT))
    if "input" in decision.request.choices[choice_id]:
        return _prompt(conn, channel, decision, choice_id, {**p, "callbackId": None}, now,
                       worker)
    answer = HumanAnswer(
        decision_id=decision.decision_id, request_digest=decision.request.request_digest,
        response={"choice": choice_id}, channel=channel.name,
        actor_id=f"telegram-user:{p['userId']}", external_event_id=row.external_event_id,
        idempotency_key=f"{channel.name}:text:{chat}:{p['messageId']}",
    )
    outcome = resolution.resolve(conn, answer, now, decision=decision,
                                allowed_channels=channel.config.routes(decision.audience))
    if outcome.result not in (Result.WON, Result.ADOPTED):
        notice(_callback_text(conn, channel, decision, outcome))
    else:
        reactions.reserve_receipt(conn, channel, decision.decision_id, chat, p["messageId"],
                                  worker, now)
    return Processed({**_outcome_result(outcome), "by": "text"})


def _command(conn: apsw.Connection, channel: Channel, row: inbox.InboxRow, now: int,
             lease: Lease) -> Processed:
    """A bot command (`/pending`, `/mute`): `commands` says what it does."""
    return Processed(commands.run(conn, channel, row.payload, now, lease))


def _reconcile_prompt(
    conn: apsw.Connection, channel: Channel, p: dict[str, Any], now: int
) -> messages.MessageRow | None:
    """A reply to a bot message whose text is that of a prompt left ambiguous (sent, but its
    response lost) proves the prompt arrived: record its references and bind the reply."""
    if not p.get("replyToBot") or not isinstance(p.get("replyToText"), str):
        return None
    chat = str(p["chatId"])
    for decision_id in views.open_decision_ids(conn):
        decision = records.load(conn, decision_id)
        for message_id, _, prompted_chat in prompts(conn, channel.channel_id, decision):
            prompt = messages.Message(message_id)
            if prompted_chat == chat and prompt.unconfirmed_text(conn) == p["replyToText"]:
                ref = str(p["replyTo"])
                prompt.confirm(conn, 0, 0, chat, ref)
                prompt.set_status(conn, MessageStatus.CONFIRMED, now, conversation_ref=chat,
                                  message_ref=ref)
                return messages.get_message(conn, message_id)
    return None


def _prompted_choice(conn: apsw.Connection, channel: Channel,
                     decision: records.StoredDecision, message_id: str) -> str | None:
    """The text choice whose prompt `message_id` is (any presser's: a reply to another
    person's prompt answers too; the reply's own sender is the one checked and recorded)."""
    return next((choice for found, choice, _ in prompts(conn, channel.channel_id, decision)
                 if messages.Message(found).stored_id(conn) == message_id), None)


def _outcome_result(outcome: Verdict) -> dict[str, Any]:
    result: dict[str, Any] = {"result": outcome.result.value, "message": outcome.message}
    if outcome.resolution is not None:
        result["outcome"] = outcome.resolution.outcome
    return result


def _callback_text(conn: apsw.Connection, channel: Channel, decision: records.StoredDecision,
                  outcome: Verdict) -> str:
    """The short text shown to the person who pressed the button (or who replied)."""
    winner = outcome.resolution
    if outcome.result in (Result.WON, Result.ADOPTED) and winner is not None:
        return f"Accepted: {_label(decision, winner.choice)}"
    if outcome.result is Result.ALREADY_RESOLVED and winner is not None:
        return outcomes.already_decided(conn, channel, decision)
    if outcome.result is Result.STALE:
        return "This decision has expired." if "expired" in outcome.message else \
            "This button is out of date."
    return f"Not accepted: {outcome.message}"


def _label(decision: records.StoredDecision, choice: str | None) -> str:
    found = decision.request.choices.get(choice or "")
    return found["label"] if found else str(choice)
