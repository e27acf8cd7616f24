"""Reserving Telegram deliveries: which open decisions go to which chats, and resends.

Runs inside the caller's transaction; the effects it reserves are applied by `outbound`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import apsw

from channels import messages, store
from channels.decisions import records, views
from channels.messages import Purpose
from channels.telegram import notifying, reminders
from channels.telegram.buttons import SETTLE_EFFECT
from channels.telegram.identity import Channel
from state import effects, resources
from state.effects import OwnerScope
from state.exit_codes import ExitCode
from state.leases import Lease
from state.resources import Actor

__all__ = [
    "DELIVER", "NOTICE", "PROMPT", "REMIND", "SETTLE", "ambiguous_chats", "delivery_failure",
    "delivery_message_id", "delivery_recipients", "due_reminders", "failed_deliveries",
    "has_unreserved", "messages_of_effect", "notice_message_id", "open_routed_decisions",
    "prompt_of", "prompts", "refused_chats", "refused_recipients", "reminder_message_id",
    "reserve_copy", "reserve_deliveries", "reserve_due_reminders", "reserve_notice",
    "reserve_resend",
]


DELIVER = "telegram.deliver"

PROMPT = "telegram.prompt"

SETTLE = SETTLE_EFFECT

NOTICE = "telegram.notice"  # a short reply to a person: a late answer, an unclear one

REMIND = "telegram.remind"  # a waiting decision brought back to the top of the chat


def delivery_recipients(
    conn: apsw.Connection, channel: Channel, decision: records.StoredDecision
) -> list[str]:
    """The recipients a delivery was made to (fixed at reservation time)."""
    card = effects.find_scoped(conn, decision.resource_id, DELIVER, channel.channel_id)
    if card is None:
        return list(channel.recipients)
    payload = card.payload(conn)
    return [str(r) for r in payload.get("recipients", channel.recipients)]


def open_routed_decisions(conn: apsw.Connection, channel: Channel, now: int) -> list[str]:
    """Open, unexpired decisions whose audience routes to this channel."""
    return [d for d, audience in views.open_unexpired(conn, now)
            if channel.routes_to_me(audience)]


def has_unreserved(conn: apsw.Connection, channel: Channel, decision_ids: Iterable[str]) -> bool:
    """Whether any of these decisions has no delivery effect on the channel yet."""
    return any(effects.find_scoped(conn, records.decision_resource(d), DELIVER,
                                  channel.channel_id) is None for d in decision_ids)


def reserve_deliveries(
    conn: apsw.Connection, channel: Channel, decision_ids: Iterable[str], worker: Actor, now: int,
    *, lease: Lease,
) -> list[str]:
    """Reserve one delivery effect per decision for this channel (adopting existing ones);
    the ids of the effects reserved now, recorded by one event of the channel (its owner's
    `lease`), not one per effect."""
    reserved: list[str] = []
    for decision_id in decision_ids:
        resource_id = records.decision_resource(decision_id)
        if effects.find_scoped(conn, resource_id, DELIVER, channel.channel_id) is not None:
            continue  # reserved once, with the recipients of that moment
        reservation = effects.reserve(
            conn, source_resource_id=resource_id, effect_type=DELIVER,
            idempotency_key=effects.scoped_key(channel.channel_id),
            # The decision is the effect's source, the channel its key: the payload is the
            # recipients alone, one blob shared by every delivery to the same chats.
            payload={"recipients": list(channel.recipients)},
            owner_scope=OwnerScope.CHANNEL, actor=worker, now=now, recorded_by_caller=True,
        )
        reserved.append(reservation.effect_id)
    if reserved:
        _record_reservations(conn, lease, channel.channel_id, reserved, now)
    return reserved


def _record_reservations(conn: apsw.Connection, lease: Lease, channel_id: str,
                         effect_ids: list[str], now: int) -> None:
    """One channel event records the effects its owner reserved in this transaction (each
    starts at revision 0, as a follow-up does): one event for a pass's new deliveries, not
    one per delivery."""
    store.verify(conn, lease, channel_id, now)
    resources.bump_current(conn, store.channel_resource(channel_id), "channel.effects_reserved",
                           lease.actor, now, payload={"effects": sorted(effect_ids)},
                           lease_generation=lease.generation)


def reserve_resend(
    conn: apsw.Connection, channel: Channel, decision_id: str, worker: Actor, now: int
) -> str:
    """An operator's explicit resend of an ambiguous or failed delivery (it may duplicate a
    part that did arrive: that is the operator's call, never the worker's)."""
    from channels.decisions.errors import DecisionRefused

    resource_id = records.decision_resource(decision_id)
    if records.resolution_of(conn, decision_id) is not None:
        raise DecisionRefused(f"{decision_id} is already resolved; nothing to resend")
    if effects.find_scoped(conn, resource_id, DELIVER, channel.channel_id) is None:
        raise DecisionRefused(f"{decision_id} was never delivered on {channel.name}")
    mine = _channel_deliveries(conn, channel.channel_id, resource_id)
    latest = mine[-1]
    refused = latest.status is effects.EffectStatus.APPLIED and \
        bool(refused_recipients(conn, channel.channel_id, resource_id))
    if latest.status not in (effects.EffectStatus.AMBIGUOUS, effects.EffectStatus.REJECTED) \
            and not refused:
        raise DecisionRefused(
            f"the delivery of {decision_id} on {channel.name} is {latest.status.value};"
            " only an ambiguous or failed delivery can be resent")
    key = f"{channel.channel_id}:resend:{len(mine)}"
    reservation = effects.reserve(
        conn, source_resource_id=resource_id,
        effect_type=DELIVER, idempotency_key=key,
        payload={"decisionId": decision_id, "channelId": channel.channel_id,
                 "recipients": list(channel.recipients), "resend": True},
        owner_scope=OwnerScope.CHANNEL, actor=worker, now=now,
    )
    return reservation.effect_id


def notice_message_id(channel_id: str, key: str) -> str:
    """The message a telegram.notice effect sends (recorded with the settlement messages)."""
    return messages.message_id_for(channel_id, Purpose.SETTLEMENT, "notice", key)


def reserve_notice(conn: apsw.Connection, channel: Channel, decision_id: str | None, chat: str,
                   reply_to: int | None, text: str, key: str, worker: Actor, now: int) -> None:
    """A short reply to a person's message (once per key: the message it answers), from the
    decision it is about, or from the channel when it is about none."""
    resource_id = records.decision_resource(decision_id) if decision_id is not None \
        else store.channel_resource(channel.channel_id)
    effects.reserve(
        conn, source_resource_id=resource_id,
        effect_type=NOTICE, idempotency_key=f"{channel.channel_id}:{key}",
        payload={"decisionId": decision_id, "channelId": channel.channel_id, "chatId": chat,
                 "replyTo": reply_to, "text": text, "key": key},
        owner_scope=OwnerScope.CHANNEL, actor=worker, now=now)


def reserve_copy(conn: apsw.Connection, channel: Channel, decision_id: str, chat: str, key: str,
                 worker: Actor, now: int) -> None:
    """The card once more, to one chat (`/pending`): a delivery of its own message, whose
    keyboard settlement removes like the first one's."""
    resource_id = records.decision_resource(decision_id)
    effects.reserve(
        conn, source_resource_id=resource_id,
        effect_type=DELIVER, idempotency_key=f"{channel.channel_id}:copy:{key}",
        payload={"decisionId": decision_id, "channelId": channel.channel_id,
                 "recipients": list(channel.recipients), "only": chat, "copy": key},
        owner_scope=OwnerScope.CHANNEL, actor=worker, now=now)


def _reminder_at(channel: Channel, decision: records.StoredDecision, after: int) -> int | None:
    """When the decision's next reminder on this channel is due after `after` (None when the
    audience wants none or none is left)."""
    audience = channel.config.audiences.get(decision.audience)
    if audience is not None and not audience.reminders:
        return None
    return reminders.next_reminder(decision.created_at, decision.deadline_at, after,
                                   audience.quiet_hours if audience is not None else None)


def due_reminders(conn: apsw.Connection, channel: Channel,
                  now: int) -> list[tuple[records.StoredDecision, int, int]]:
    """(decision, number, time) of each reminder whose time has come on this channel: the
    card delivered, no reminder outstanding, the last one sent. A reminder is reserved only
    once it is due, so a decision answered before (most are) never has one: no effect, no
    resource, no events. Its time counts from the card's delivery, then from the last
    reminder sent (as before: the same times). A refused or ambiguous reminder ends them."""
    found = []
    asked_before = now - reminders.EARLIEST_MS
    for decision_id, _ in views.open_unexpired(conn, now, asked_before=asked_before):
        resource_id = records.decision_resource(decision_id)
        card = effects.find_scoped(conn, resource_id, DELIVER, channel.channel_id)
        if card is None or card.status is not effects.EffectStatus.APPLIED \
                or card.settled_at is None:
            continue
        sent = [e for e in effects.list_for_source(conn, resource_id, REMIND)
                if e.idempotency_key.startswith(channel.channel_id + ":")]
        if sent and (sent[-1].status is not effects.EffectStatus.APPLIED
                     or sent[-1].settled_at is None):
            continue  # outstanding, or refused: no other
        decision = records.load(conn, decision_id)
        if not channel.routes_to_me(decision.audience):
            continue
        after = sent[-1].settled_at if sent else card.settled_at
        assert after is not None
        at = _reminder_at(channel, decision, after)
        if at is not None and at <= now:
            found.append((decision, len(sent) + 1, at))
    return found


def reserve_due_reminders(conn: apsw.Connection, channel: Channel, worker: Actor,
                          now: int) -> list[str]:
    """Reserve every reminder due now on this channel (see `due_reminders`); their ids."""
    reserved = []
    for decision, number, at in due_reminders(conn, channel, now):
        reservation = effects.reserve(
            conn, source_resource_id=decision.resource_id, effect_type=REMIND,
            idempotency_key=f"{channel.channel_id}:{number}",
            payload={"decisionId": decision.decision_id, "channelId": channel.channel_id,
                     "number": number, "at": at},
            owner_scope=OwnerScope.CHANNEL, actor=worker, now=now, available_at=at)
        reserved.append(reservation.effect_id)
    return reserved


def reminder_message_id(channel_id: str, decision_id: str, number: int) -> str:
    return messages.message_id_for(channel_id, Purpose.SETTLEMENT, "reminder", decision_id,
                                   str(number))


def delivery_message_id(channel_id: str, decision_id: str, payload: dict[str, Any]) -> str:
    """The message a telegram.deliver effect sends: the card, or a copy of it."""
    copy = payload.get("copy")
    extra = ["copy", str(copy)] if copy is not None else []
    return messages.message_id_for(channel_id, Purpose.DELIVERY, decision_id, *extra)


def _prompt_message_id(channel_id: str, decision_id: str, choice_id: str, chat_id: str,
                      presser: int | None = None) -> str:
    """The ForceReply prompt of one text choice of a decision, in one chat; in a group, one
    per person who pressed (it names them, so that their reply box opens)."""
    if presser is None:
        return messages.message_id_for(channel_id, Purpose.PROMPT, decision_id, choice_id, chat_id)
    return messages.message_id_for(channel_id, Purpose.PROMPT, decision_id, choice_id, chat_id,
                                   str(presser))


def prompt_of(payload: dict[str, Any]) -> str:
    """The message id of the prompt a telegram.prompt effect sends."""
    presser = payload.get("presser")
    return _prompt_message_id(str(payload["channelId"]), str(payload["decisionId"]),
                             str(payload["choiceId"]), str(payload["chatId"]),
                             presser if isinstance(presser, int) else None)


def prompts(conn: apsw.Connection, channel_id: str,
            decision: records.StoredDecision) -> list[tuple[str, str, str]]:
    """(message id, choice id, chat) of every prompt presses asked for on the channel."""
    found = []
    for effect in effects.list_for_source(conn, decision.resource_id, PROMPT):
        payload = effect.payload(conn)
        if payload.get("channelId") == channel_id:
            found.append((prompt_of(payload), str(payload["choiceId"]), str(payload["chatId"])))
    return found


def _channel_deliveries(conn: apsw.Connection, channel_id: str,
                        resource_id: str) -> list[effects.Effect]:
    """The delivery effects of one decision on this channel (the first, then resends)."""
    return effects.list_for_source(conn, resource_id, DELIVER, scope=channel_id)


def refused_recipients(conn: apsw.Connection, channel_id: str,
                       resource_id: str) -> list[dict[str, Any]]:
    """The recipients (with their chat) the latest settled delivery of a decision on this
    channel was refused for: blocked, chat unknown, group migrated, or another error."""
    mine = _channel_deliveries(conn, channel_id, resource_id)
    if not mine or mine[-1].status not in (effects.EffectStatus.APPLIED,
                                           effects.EffectStatus.REJECTED):
        return []
    return refused_chats(conn, mine[-1])


def refused_chats(conn: apsw.Connection, effect: effects.Effect) -> list[dict[str, Any]]:
    """The recipients a settled Telegram send (a card's delivery, a notification) was refused
    for, each with its chat: its result lists them by their index in its payload's."""
    outcome = effect.result(conn)
    if not isinstance(outcome, dict):
        return []
    recipients = [str(r) for r in effect.payload(conn).get("recipients", [])]
    refused = []
    for entry in outcome.get("recipients", []):
        index = entry.get("index")
        if entry.get("status") == "rejected" and isinstance(index, int) \
                and index < len(recipients):
            refused.append({**entry, "chat": recipients[index]})
    return refused


def failed_deliveries(conn: apsw.Connection, channel: Channel) -> list[str]:
    """Open decisions whose latest delivery on this channel failed or was refused for a
    recipient (what `resend --all-failed` resends; ambiguous ones need a look first)."""
    found = []
    for decision_id, resource_id, _ in views.open_deliveries(conn, channel.channel_id):
        mine = _channel_deliveries(conn, channel.channel_id, resource_id)
        if mine and (mine[-1].status is effects.EffectStatus.REJECTED
                     or refused_recipients(conn, channel.channel_id, resource_id)):
            found.append(decision_id)
    return found


def messages_of_effect(conn: apsw.Connection, channel_id: str,
                       effect: effects.Effect) -> list[messages.Message]:
    """The channel messages an effect writes (to check for intent rows)."""
    return [messages.Message(m) for m in _message_ids_of_effect(conn, channel_id, effect)]


def _message_ids_of_effect(conn: apsw.Connection, channel_id: str,
                           effect: effects.Effect) -> list[str]:
    p = effect.payload(conn)
    if effect.effect_type == notifying.NOTIFY:
        return [notifying.message_of(channel_id, p)]
    decision_id = records.decision_of_resource(effect.source_resource_id)
    if effect.effect_type == PROMPT:
        return [prompt_of(p)]
    if effect.effect_type == NOTICE:
        return [notice_message_id(channel_id, str(p["key"]))]
    if effect.effect_type == REMIND:
        return [reminder_message_id(channel_id, decision_id, int(p["number"]))]
    if effect.effect_type == DELIVER:
        return [delivery_message_id(channel_id, decision_id, p)]
    return [messages.message_id_for(channel_id, Purpose.SETTLEMENT, decision_id)]


def delivery_failure(conn: apsw.Connection, channel_id: str,
                     resource_id: str) -> dict[str, Any] | None:
    """Why the latest delivery of a decision on this channel failed for good before any
    recipient was tried (a bug, or a request this channel cannot render), with the exit code
    that tells it: 1 for a bug, 2 for the request; None when it did not fail so."""
    mine = _channel_deliveries(conn, channel_id, resource_id)
    if not mine or mine[-1].status is not effects.EffectStatus.REJECTED:
        return None
    error = mine[-1].error(conn)
    if not isinstance(error, dict) or "recipients" in error:
        return None
    internal = "internal" in error
    return {"description": str(error.get("internal") or error.get("description") or "failed"),
            "exitCode": ExitCode.INTERNAL if internal else ExitCode.USAGE}


def ambiguous_chats(conn: apsw.Connection, channel_id: str, decision_id: str,
                    resource_id: str) -> list[str]:
    """The chats of a decision's delivery on this channel whose part may or may not have
    arrived (a part row left as an intent): the ones to check."""
    mine = _channel_deliveries(conn, channel_id, resource_id)
    if not mine:
        return []
    payload = mine[-1].payload(conn)
    recipients = [str(r) for r in payload.get("recipients", [])]
    message_id = delivery_message_id(channel_id, decision_id, payload)
    unknown = sorted({p.recipient_index for p in messages.Message(message_id).parts(conn)
                      if p.is_intent})
    return [recipients[r] for r in unknown if r < len(recipients)]
