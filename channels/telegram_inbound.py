"""Processing Telegram inbox rows: button presses, replies to prompts, everything else.

Each row is processed in its own write transaction together with its consequences (a
submission through the single resolution function, a prompt effect), and its result is
recorded in the same transaction: `accepted`, `already_resolved`, `ignored:<reason>`, ...
The callback answer text is returned so the caller can answer right after the commit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import apsw

from channels import decisions, store
from channels.config import ChannelsConfig, TelegramProfile
from channels.decision_request import DecisionRequest, channel_request_document
from channels.decisions import HumanAnswer, Outcome, Result
from channels.presentation import callback_token, split_parts
from state import effects
from state.leases import Lease
from state.resources import Actor, current_revision

TOKEN_RE = re.compile(r"piw:[0-9a-f]{24}")
DELIVER = "telegram.deliver"
PROMPT = "telegram.prompt"
SETTLE = "telegram.settle"
CALLBACK_TEXT_LIMIT = 200
RECENT_MS = 7 * 24 * 3600 * 1000  # presses on decisions resolved this long ago are unknown


@dataclass(frozen=True, slots=True)
class Channel:
    """One configured Telegram profile as a channel."""

    profile: TelegramProfile
    config: ChannelsConfig

    @property
    def channel_id(self) -> str:
        return store.telegram_channel_id(self.profile.name)

    @property
    def name(self) -> str:
        """The route name used in audiences and submissions: `telegram:<profile>`."""
        return f"telegram:{self.profile.name}"

    def routes_to_me(self, audience: str) -> bool:
        return self.name in self.config.routes(audience)

    @property
    def recipients(self) -> tuple[str, ...]:
        """Allowlisted chats in a stable order; recipient indexes are zero-based."""
        return tuple(sorted(self.profile.allowed_chat_ids))


class ButtonIndex:
    """callback_data token -> (decision, choice) for decisions this channel presented.

    Tokens are derived from immutable request data, so the index is only ever extended.
    """

    def __init__(self) -> None:
        self._tokens: dict[str, tuple[str, str]] = {}
        self._known: set[str] = set()

    def add(self, request: DecisionRequest) -> None:
        self._add(request.decision_id, request.request_digest, list(request.choices))

    def _add(self, decision_id: str, request_digest: str, choice_ids: list[str]) -> None:
        if decision_id in self._known:
            return
        self._known.add(decision_id)
        for choice_id in choice_ids:
            token = callback_token(decision_id, request_digest, choice_id)
            self._tokens[token] = (decision_id, choice_id)

    def refresh(self, conn: apsw.Connection, channel_id: str, now: int) -> None:
        """Index decisions presented on the channel that are open or recently resolved (a press
        on an older one is answered as an unknown button: its keyboard was removed long ago)."""
        for decision_id, digest, choice_ids in decisions.button_basis(
                conn, channel_id, now - RECENT_MS):
            self._add(decision_id, digest, choice_ids)

    def lookup(self, token: str) -> tuple[str, str] | None:
        return self._tokens.get(token)

    def find(self, conn: apsw.Connection, channel_id: str, token: str, now: int
             ) -> tuple[str, str] | None:
        """Look a token up, reading newly presented decisions only on a miss."""
        found = self._tokens.get(token)
        if found is None:
            self.refresh(conn, channel_id, now)
            found = self._tokens.get(token)
        return found


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
    row: store.InboxRow,
    now: int,
) -> Processed:
    """Process one inbox row exactly once, inside the caller's transaction."""
    store.verify(conn, lease, channel.channel_id, now)
    if row.event_type == "callback":
        processed = _callback(conn, channel, index, row, now, lease.actor)
    elif row.event_type == "reply":
        processed = _reply(conn, channel, row, now)
    else:
        processed = Processed(_ignored(str(row.payload.get("kind", "unsupported"))))
    store.mark_processed(conn, channel.channel_id, row.external_event_id, processed.result, now)
    return processed


def _ignored(reason: str) -> dict[str, Any]:
    return {"result": f"ignored:{reason}"}


def _answered(callback_id: Any, result: dict[str, Any], text: str) -> Processed:
    if not isinstance(callback_id, str) or not callback_id:
        return Processed(result)
    return Processed(result, (callback_id, text[:CALLBACK_TEXT_LIMIT]))


# -- button presses ----------------------------------------------------------------------------


def _callback(
    conn: apsw.Connection,
    channel: Channel,
    index: ButtonIndex,
    row: store.InboxRow,
    now: int,
    worker: Actor,
) -> Processed:
    p = row.payload
    callback_id = p.get("callbackId")
    user, chat = p.get("userId"), p.get("chatId")
    if p.get("inline") or user is None or chat is None:
        return _answered(callback_id, _ignored("no_chat"), "This button cannot be used here.")
    if not channel.profile.allows(str(user), str(chat)):
        return _answered(callback_id, _ignored("not_allowed"),
                         "You are not allowed to answer this decision.")
    data = p.get("data")
    found = index.find(conn, channel.channel_id, data, now) \
        if isinstance(data, str) and TOKEN_RE.fullmatch(data) else None
    if found is None:
        return _answered(callback_id, _ignored("unknown_button"), "This button is not valid.")
    decision_id, choice_id = found
    decision = decisions.load(conn, decision_id)
    if p.get("accessible") and isinstance(p.get("messageId"), int):
        _reconcile(conn, channel, decision, str(chat), str(p["messageId"]))
    if "input" in decision.request.choices[choice_id]:
        return _prompt(conn, channel, decision, choice_id, p, now, worker)
    answer = HumanAnswer(
        decision_id=decision_id, request_digest=decision.request.request_digest,
        response={"choice": choice_id}, channel=channel.name,
        actor_id=f"telegram-user:{user}", external_event_id=row.external_event_id,
        idempotency_key=f"{channel.name}:callback:{callback_id or row.external_event_id}",
    )
    outcome = decisions.resolve(conn, answer, now, decision=decision,
                                allowed_channels=channel.config.routes(decision.audience))
    return _answered(callback_id, _outcome_result(outcome), callback_text(decision, outcome))


def _prompt(
    conn: apsw.Connection,
    channel: Channel,
    decision: decisions.StoredDecision,
    choice_id: str,
    p: dict[str, Any],
    now: int,
    worker: Actor,
) -> Processed:
    """A choice that needs text: send one ForceReply prompt (a second press reuses it)."""
    winner = decisions.resolution_of(conn, decision.decision_id)
    if winner is not None:
        outcome = Outcome(Result.ALREADY_RESOLVED, "already resolved", winner)
        return _answered(p.get("callbackId"), _outcome_result(outcome),
                         callback_text(decision, outcome))
    if decision.deadline_at is not None and now >= decision.deadline_at:
        return _answered(p.get("callbackId"), {"result": "stale"}, "This decision has expired.")
    choice = decision.request.choices[choice_id]
    text_input = choice["input"]
    chat = str(p["chatId"])
    effects.reserve(
        conn, source_resource_id=decision.resource_id,
        source_revision=_revision(conn, decision.resource_id), effect_type=PROMPT,
        idempotency_key=f"{channel.channel_id}:{chat}:{choice_id}",
        payload={"decisionId": decision.decision_id, "choiceId": choice_id,
                 "channelId": channel.channel_id, "chatId": chat, "threadId": p.get("threadId"),
                 "text": f"{choice['label']}: {text_input['prompt']}"},
        owner_scope="channel", actor=worker, now=now,
    )
    return _answered(p.get("callbackId"), {"result": "prompted", "choice": choice_id},
                     "Reply to the prompt message with your text.")


def _revision(conn: apsw.Connection, resource_id: str) -> int:
    return current_revision(conn, resource_id) or 0


def _reconcile(
    conn: apsw.Connection,
    channel: Channel,
    decision: decisions.StoredDecision,
    chat: str,
    message_ref: str,
) -> None:
    """A press on a message proves that message (the last part, which carries the keyboard)
    was delivered: record its references if that part was left ambiguous."""
    message_id = store.message_id_for(channel.channel_id, "delivery", decision.decision_id)
    if store.get_message(conn, message_id) is None:
        return
    recipients = delivery_recipients(conn, channel, decision)
    if chat not in recipients:
        return
    recipient = recipients.index(chat)
    last = len(split_parts(channel_request_document(decision.request))) - 1
    for part in store.parts(conn, message_id):
        if (part.recipient_index, part.part_index) == (recipient, last) and part.is_intent:
            store.confirm_part(conn, message_id, recipient, last, chat, message_ref)


def delivery_recipients(
    conn: apsw.Connection, channel: Channel, decision: decisions.StoredDecision
) -> list[str]:
    """The recipients a delivery was made to (fixed at reservation time)."""
    effect_id = effects.effect_id_for(decision.resource_id, DELIVER, channel.channel_id)
    try:
        payload = effects.payload(conn, effects.get(conn, effect_id))
    except KeyError:
        return list(channel.recipients)
    return [str(r) for r in payload.get("recipients", channel.recipients)]


# -- replies -----------------------------------------------------------------------------------


def _reply(
    conn: apsw.Connection, channel: Channel, row: store.InboxRow, now: int
) -> Processed:
    p = row.payload
    user, chat, reply_to = p.get("userId"), p.get("chatId"), p.get("replyTo")
    if user is None or chat is None or reply_to is None or p.get("messageId") is None:
        return Processed(_ignored("malformed"))
    if not channel.profile.allows(str(user), str(chat)):
        return Processed(_ignored("not_allowed"))
    prompt = store.find_message_by_ref(conn, channel.channel_id, "prompt", str(chat),
                                       str(reply_to)) or _reconcile_prompt(conn, channel, p, now)
    if prompt is None or prompt.decision_id is None:
        return Processed(_ignored("unbound_reply"))
    text = p.get("text")
    if not isinstance(text, str):
        return Processed(_ignored("not_text"))
    decision = decisions.load(conn, prompt.decision_id)
    choice_id = _prompted_choice(channel, decision, str(chat), prompt.message_id)
    if choice_id is None:
        return Processed(_ignored("unbound_reply"))
    name = decision.request.choices[choice_id]["input"]["name"]
    answer = HumanAnswer(
        decision_id=decision.decision_id, request_digest=decision.request.request_digest,
        response={"choice": choice_id, "input": {name: text}}, channel=channel.name,
        actor_id=f"telegram-user:{user}", external_event_id=row.external_event_id,
        idempotency_key=f"{channel.name}:reply:{chat}:{p['messageId']}",
    )
    outcome = decisions.resolve(conn, answer, now, decision=decision,
                                allowed_channels=channel.config.routes(decision.audience))
    return Processed(_outcome_result(outcome))


def _reconcile_prompt(
    conn: apsw.Connection, channel: Channel, p: dict[str, Any], now: int
) -> store.MessageRow | None:
    """A reply to a bot message whose text is that of a prompt left ambiguous (sent, but its
    response lost) proves the prompt arrived: record its references and bind the reply."""
    if not p.get("replyToBot") or not isinstance(p.get("replyToText"), str):
        return None
    chat = str(p["chatId"])
    for decision_id in decisions.open_decision_ids(conn):
        request = decisions.load(conn, decision_id).request
        for choice_id, choice in request.choices.items():
            if "input" not in choice:
                continue
            message_id = store.message_id_for(channel.channel_id, "prompt", decision_id,
                                              choice_id, chat)
            if store.unconfirmed_text(conn, message_id) == p["replyToText"]:
                ref = str(p["replyTo"])
                store.confirm_part(conn, message_id, 0, 0, chat, ref)
                store.set_message_status(conn, message_id, "confirmed", now,
                                         conversation_ref=chat, message_ref=ref)
                return store.get_message(conn, message_id)
    return None


def _prompted_choice(
    channel: Channel, decision: decisions.StoredDecision, chat: str, message_id: str
) -> str | None:
    for choice_id, choice in decision.request.choices.items():
        if "input" in choice and store.message_id_for(
            channel.channel_id, "prompt", decision.decision_id, choice_id, chat
        ) == message_id:
            return choice_id
    return None


# -- results and texts -------------------------------------------------------------------------


def _outcome_result(outcome: Outcome) -> dict[str, Any]:
    result: dict[str, Any] = {"result": outcome.result.value, "message": outcome.message}
    if outcome.resolution is not None:
        result["outcome"] = outcome.resolution.outcome
    return result


def callback_text(decision: decisions.StoredDecision, outcome: Outcome) -> str:
    """The short text shown to the person who pressed the button."""
    winner = outcome.resolution
    if outcome.result in (Result.WON, Result.ADOPTED) and winner is not None:
        return f"Accepted: {_label(decision, winner.choice)}"
    if outcome.result is Result.ALREADY_RESOLVED and winner is not None:
        if winner.outcome == "cancelled":
            return f"Already decided: cancelled ({winner.reason})"
        return f"Already decided: {_label(decision, winner.choice)}"
    if outcome.result is Result.STALE:
        return "This decision has expired." if "expired" in outcome.message else \
            "This button is out of date."
    return f"Not accepted: {outcome.message}"


def _label(decision: decisions.StoredDecision, choice: str | None) -> str:
    found = decision.request.choices.get(choice or "")
    return found["label"] if found else str(choice)


def keyboard(request: DecisionRequest) -> dict[str, Any]:
    """One row per choice: the label and its callback token."""
    return {"inline_keyboard": [
        [{"text": choice["label"],
          "callback_data": callback_token(request.decision_id, request.request_digest, cid)}]
        for cid, choice in request.choices.items()
    ]}


def open_routed_decisions(conn: apsw.Connection, channel: Channel, now: int) -> list[str]:
    """Open, unexpired decisions whose audience routes to this channel."""
    return [d for d, audience in decisions.open_unexpired(conn, now)
            if channel.routes_to_me(audience)]


def reserve_deliveries(
    conn: apsw.Connection, channel: Channel, decision_ids: Iterable[str], worker: Actor, now: int
) -> int:
    """Reserve one delivery effect per decision for this channel (adopting existing ones)."""
    reserved = 0
    for decision_id in decision_ids:
        resource_id = decisions.decision_resource(decision_id)
        existing = effects.effect_id_for(resource_id, DELIVER, channel.channel_id)
        if effects.exists(conn, existing):
            continue  # reserved once, with the recipients of that moment
        effects.reserve(
            conn, source_resource_id=resource_id, source_revision=_revision(conn, resource_id),
            effect_type=DELIVER, idempotency_key=channel.channel_id,
            payload={"decisionId": decision_id, "channelId": channel.channel_id,
                     "recipients": list(channel.recipients)},
            owner_scope="channel", actor=worker, now=now,
        )
        reserved += 1
    return reserved


def reserve_resend(
    conn: apsw.Connection, channel: Channel, decision_id: str, worker: Actor, now: int
) -> str:
    """An operator's explicit resend of an ambiguous or failed delivery (it may duplicate a
    part that did arrive: that is the operator's call, never the worker's)."""
    from channels.errors import DecisionRefused

    resource_id = decisions.decision_resource(decision_id)
    if decisions.resolution_of(conn, decision_id) is not None:
        raise DecisionRefused(f"{decision_id} is already resolved; nothing to resend")
    original = effects.effect_id_for(resource_id, DELIVER, channel.channel_id)
    if not effects.exists(conn, original):
        raise DecisionRefused(f"{decision_id} was never delivered on {channel.name}")
    keys = [e.idempotency_key for e in effects.list_for_source(conn, resource_id, DELIVER)
            if e.idempotency_key.startswith(channel.channel_id)]
    latest = effects.get(conn, effects.effect_id_for(resource_id, DELIVER, keys[-1]))
    if latest.status not in (effects.EffectStatus.AMBIGUOUS, effects.EffectStatus.REJECTED):
        raise DecisionRefused(
            f"the delivery of {decision_id} on {channel.name} is {latest.status.value};"
            " only an ambiguous or failed delivery can be resent")
    key = f"{channel.channel_id}:resend:{len(keys)}"
    reservation = effects.reserve(
        conn, source_resource_id=resource_id, source_revision=_revision(conn, resource_id),
        effect_type=DELIVER, idempotency_key=key,
        payload={"decisionId": decision_id, "channelId": channel.channel_id,
                 "recipients": list(channel.recipients), "resend": True},
        owner_scope="channel", actor=worker, now=now,
    )
    return reservation.effect_id
