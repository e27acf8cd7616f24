"""Applying Telegram effects: deliveries, prompts, notices, reminders (settlements:
`settle_sends`; notifications: `notifying`).
Nothing is sent twice blindly: before each part (a message, or an attached file) is sent its
row is committed without provider references (the intent); a confirmed send writes the
references; a provably unsent try (connection refused, pool timeout, an error response)
removes the intent in the transaction that records the try; a part left as an intent (a crash,
a timeout after the request left) is ambiguous and never re-sent automatically, only by an
explicit operator resend. No transaction is held while a request is on the wire.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from channels import messages
from channels.decisions import records
from channels.decisions.errors import DecisionError
from channels.decisions.presentation import fingerprint
from channels.decisions.request import channel_request_document
from channels.messages import MessageStatus, Purpose
from channels.telegram import notifying, reactions, reminders
from channels.telegram.buttons import ButtonIndex, keyboard
from channels.telegram.effect_kinds import EFFECT_TYPES, LEVELS
from channels.telegram.failures import Failure
from channels.telegram.identity import Channel
from channels.telegram.notifying import NOTIFY
from channels.telegram.pacing import Pacer, sending_as
from channels.telegram.reactions import REACT
from channels.telegram.reservations import (
    DELIVER,
    NOTICE,
    PROMPT,
    REMIND,
    SETTLE,
    delivery_message_id,
    notice_message_id,
    prompt_of,
    reminder_message_id,
)
from channels.telegram.settle_rules import (
    maybe_acted,
    token_rejected,
)
from channels.telegram.transport import BotApi, CallOutcome, ProviderResult, describe
from state import effects, leases
from state.database import Database
from state.effects import Attempt, AttemptOutcome, Effect
from state.errors import StaleLease, StateError, WriteRejected
from state.resources import Actor, ActorType

if TYPE_CHECKING:  # what applies an effect is imported by the step that applies it: an idle
    # cron pass applies none and loads none of it (its start-up is a cron run's cost)
    from channels.telegram.plans import Delivery, Settlement

__all__ = ["LEASE_MARGIN_S", "Outbound"]


_NOT_SENT_BACKOFF_MS = 5_000
_BEGIN_MARGIN_MS = 500
LEASE_MARGIN_S = 5.0  # a call (with its retries) ends this long before its lease could lapse

@dataclass
class Outbound:
    """Applies this channel's due effects (one worker, one channel lease)."""

    db: Database
    api: BotApi
    channel: Channel
    owner_id: str
    index: ButtonIndex
    deadline: Callable[[], float]  # epoch seconds by which calls must end
    errors: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)  # effects that failed alone
    # The Bot API refused the token (401/404): nothing was sent, and nothing will be until the
    # token works again, so this pass applies no more effects (they stay due).
    unauthorized: bool = False
    pacer: Pacer | None = None  # the pass's pacer: effects it cannot serve stay due
    refused: list[dict[str, Any]] = field(default_factory=list)  # settlements refused for good

    def _now(self) -> int:
        return self.db.clock.now_ms()

    @property
    def _actor(self) -> Actor:
        return Actor(ActorType.CHANNEL, self.owner_id)

    async def apply_due(self, types: tuple[str, ...] = EFFECT_TYPES, concurrency: int = 1) -> int:
        """Apply every due effect of this channel (of `types`), up to `concurrency` at once
        (each under its own lease; every write its own short transaction); how many were
        attempted. The first error is raised once all have finished."""
        due = self.db.read(lambda c: effects.list_due(c, types, self._now(),
                                                      scope=self.channel.channel_id))
        self.unauthorized = False  # the token may work again (a getUpdates just succeeded)
        if concurrency <= 1:
            applied = 0
            for effect in due:
                if self.unauthorized:
                    break
                if self.blocked(effect):
                    continue  # held by a 429, or no slot before the deadline: no attempt
                await self.apply(effect)
                applied += 1
            return applied
        slots = asyncio.Semaphore(concurrency)

        async def one(effect: Effect) -> bool:
            async with slots:
                if self.unauthorized:  # a refused token: the rest stay due, unsent
                    return False
                await self.apply(effect)
                return True

        outcomes = await asyncio.gather(*(one(e) for e in due), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return sum(1 for outcome in outcomes if outcome is True)

    def blocked(self, effect: Effect) -> bool:
        """Nothing of this effect could go before the deadline (a 429 holds the bot or all
        its chats, or no slot comes in time): it stays due, unattempted."""
        if self.pacer is None:
            return False
        p = None if effect.effect_type == SETTLE else \
            self.db.read(lambda c: effect.payload(c))  # a settlement's chats: later
        # Less the time an attempt takes to begin, or it is begun for a slot it then misses.
        left_ms = int((self.deadline() - time.time()) * 1000) - _BEGIN_MARGIN_MS
        return self.pacer.blocked(p, left_ms)

    async def apply(self, effect: Effect, level: int | None = None) -> None:
        """Apply one effect, its sends at `level` (default: deliveries NORMAL, settlements
        SETTLING, prompts and notices URGENT)."""
        with sending_as(LEVELS[effect.effect_type] if level is None else level):
            if effect.effect_type != NOTIFY or await notifying.ready(self, effect, self._apply):
                await self._apply(effect)

    async def _apply(self, effect: Effect) -> None:
        from channels.telegram import settle_sends

        def begin(c: Any) -> tuple[Attempt, Settlement | None]:
            attempt = effect.begin_attempt(c, leases.OwnerType.CHANNEL, self.owner_id,
                                           self._now(), self.db.entropy)
            # A settlement's intents commit with its attempt: one commit before the sends.
            return attempt, (settle_sends.intents(c, self.channel, attempt, self._now())
                             if effect.effect_type == SETTLE else None)

        try:
            attempt, settlement = self.db.write(begin)
        except StateError:
            return  # another owner took it, or it was settled meanwhile
        except Exception as exc:  # a bug in the settlement's intents: this effect fails alone
            self._fail_unbegun(effect, exc)
            return
        try:
            if effect.effect_type == DELIVER:
                await self._deliver(attempt)
            elif effect.effect_type == PROMPT:
                await self._prompt(attempt)
            elif effect.effect_type == NOTICE:
                await self._notice(attempt)
            elif effect.effect_type == REMIND:
                await self._remind(attempt)
            elif effect.effect_type == NOTIFY:
                await notifying.apply(self, attempt)
            elif effect.effect_type == REACT:
                await reactions.apply(self, attempt)
            else:
                assert settlement is not None
                await settle_sends.settle(self, attempt, settlement)
        except StaleLease:
            return  # the effect's lease lapsed and another owner took it over
        except Exception as exc:  # a bug must not turn into a poison effect retried forever
            if isinstance(exc, StateError) and not isinstance(exc, WriteRejected):
                raise  # the database's own failure: not this effect's
            self._give_up(attempt, exc)

    def _give_up(self, attempt: Attempt, exc: Exception) -> None:
        from channels.telegram import giving_up

        self.failures.append(giving_up.give_up(self.db, self.channel.channel_id, attempt, exc,
                                               self.errors))

    def _fail_unbegun(self, effect: Effect, exc: Exception) -> None:
        from channels.telegram import giving_up

        found = giving_up.give_up_unbegun(self.db, self.channel.channel_id, effect,
                                          self.owner_id, exc, self.errors)
        self.failures += [] if found is None else [found]

    # -- recording -----------------------------------------------------------------------------

    def _finish(self, attempt: Attempt, outcome: effects.AttemptOutcome, *, result: Any = None,
                error: Any = None, retry_in_ms: int | None = None) -> None:
        retry_at = None if retry_in_ms is None else self._now() + retry_in_ms
        self.db.write(lambda c: attempt.finish(
            c, outcome, self._now(), result=result, error=error, retry_at=retry_at))

    def note_error(self, method: str, res: ProviderResult) -> None:
        self.errors.append({"method": method, **describe(res)})

    def _renew(self, attempt: Attempt) -> Attempt:
        return self.db.write(lambda c: attempt.renew(c, self._now()))

    def renew_if_due(self, attempt: Attempt) -> Attempt:
        """Renew the attempt's lease only when it nears expiry (no empty transaction)."""
        if not attempt.lease.needs_renewal(self._now()):
            return attempt
        return self._renew(attempt)

    def until(self, attempt: Attempt) -> float:
        """The deadline of a call: the window's end, or earlier so the lease outlives it."""
        return min(self.deadline(), attempt.lease.expires_at / 1000 - LEASE_MARGIN_S)

    # -- delivery ------------------------------------------------------------------------------

    async def _deliver(self, attempt: Attempt) -> None:
        from channels.telegram import documents
        from channels.telegram.card import card_parts
        from channels.telegram.plans import Delivery

        payload = self.db.read(lambda c: attempt.effect.payload(c))
        decision_id = records.decision_of_resource(attempt.effect.source_resource_id)
        decision = self.db.read(lambda c: records.load(c, decision_id))
        document = channel_request_document(decision.request)
        try:
            found = documents.attachment_of(decision.request)  # a gated call's long input
            parts = documents.with_document(card_parts(document, self._now()), None if found
                                            is None else documents.document_part(found, document))
        except DecisionError as exc:
            self._finish(attempt, AttemptOutcome.REJECTED, error={"description": str(exc)})
            return
        message_id = delivery_message_id(self.channel.channel_id, decision_id, payload)
        # The message's text is the card as sent: one part, one blob for message and part.
        text = "\n\n".join(part.text for part in parts)
        self.db.write(lambda c: messages.ensure_message(
            c, message_id, self.channel.channel_id, decision_id, Purpose.DELIVERY, text,
            self._now()))
        self.index.add(decision.request)  # presses may arrive before this attempt finishes
        only = payload.get("only")
        delivery = Delivery(decision_id, message_id, parts, keyboard(decision.request),
                             [str(r) for r in payload["recipients"]], bool(payload.get("resend")),
                             None if only is None else str(only))
        await self._send_delivery(attempt, delivery)

    async def _send_delivery(self, attempt: Attempt, d: Delivery) -> None:
        report: list[dict[str, Any]] = []
        unknown: list[dict[str, Any]] = []  # recipients whose part may or may not have arrived
        for r, chat in enumerate(d.recipients):
            if d.only is not None and chat != d.only:
                continue  # a copy for one chat keeps the recipient numbering of the card
            status, attempt = await self._send_recipient(attempt, d, r, chat)
            if status.get("status") == "ambiguous":
                unknown.append({**status, "chat": chat})
                continue  # one chat's unknown part never holds up the other chats
            if status.get("status") in ("not_sent", "rate_limited"):
                return  # that path already recorded the attempt
            report.append(status)
        if unknown:
            self._ambiguous(attempt, d.message_id, {"recipients": unknown, "others": report})
            return
        delivered = sum(1 for s in report if s["status"] == "confirmed")
        message_status = messages.MessageStatus("confirmed" if delivered else "failed")
        self.db.write(lambda c: messages.Message(d.message_id).set_status(c, message_status,
                                                                          self._now()))
        outcome = effects.AttemptOutcome("applied" if delivered else "rejected")
        # The card is out; its first reminder is reserved once it is due (`due_reminders`).
        self.db.write(lambda c: attempt.finish(c, outcome, self._now(),
                                               result={"recipients": report}))

    async def _send_recipient(
        self, attempt: Attempt, d: Delivery, r: int, chat: str
    ) -> tuple[dict[str, Any], Attempt]:
        from channels.telegram import documents

        rows = self.db.read(messages.Message(d.message_id).placed_parts)
        for index, part in enumerate(d.parts):
            row = rows.get((r, index))
            if row is not None and not row.is_intent:
                continue  # confirmed earlier: never sent again
            if row is not None and not d.resend:
                return {"status": "ambiguous", "recipient": r, "part": index,
                        "reason": "unsettled_intent"}, attempt
            attempt = self._write_intent(attempt, d.message_id, r, index, part.text, row is None)
            method, res = await documents.send(self.api, chat, part, d.markup if part.last
                                               else None, self.until(attempt))
            status = self._part_result(attempt, d.message_id, r, index, chat, res, method)
            if status is not None:
                return status, attempt
        return {"index": r, "status": "confirmed"}, attempt

    def _write_intent(self, attempt: Attempt, message_id: str, r: int, p: int, text: str,
                      new: bool) -> Attempt:
        def command(c: Any) -> Attempt:
            renewed = attempt.renew(c, self._now())
            if new:
                messages.Message(message_id).write_intent(c, r, p, text, self._now())
            return renewed
        return self.db.write(command)

    def _part_result(self, attempt: Attempt, message_id: str, r: int, p: int, chat: str,
                     res: ProviderResult, method: str = "sendMessage") -> dict[str, Any] | None:
        """Record one send; None to go on with the next part, else the recipient's status."""
        if res.outcome == CallOutcome.OK and res.message_id is not None:
            ref = str(res.message_id)
            self.db.write(lambda c: messages.Message(message_id).confirm(c, r, p, chat, ref))
            return None
        self.note_error(method, res)
        if maybe_acted(res):  # the caller records it (a delivery goes on to other chats)
            return {"status": "ambiguous", "recipient": r, "part": p, **describe(res)}
        self.db.write(lambda c: messages.Message(message_id).unsend(c, r, p))
        if res.outcome == CallOutcome.NOT_SENT or token_rejected(res):
            # Provably not sent: due again; after a refused token at once, since this pass
            # sends nothing more and the next one starts only if the token works again.
            self.unauthorized = self.unauthorized or token_rejected(res)
            self._finish(attempt, AttemptOutcome.REJECTED, error=describe(res),
                         retry_in_ms=0 if token_rejected(res) else _NOT_SENT_BACKOFF_MS)
            return {"status": "not_sent"}
        if res.is_rate_limited:
            wait_ms = int(float(res.retry_after or 1) * 1000)
            self._finish(attempt, AttemptOutcome.REJECTED, error=describe(res), retry_in_ms=wait_ms)
            return {"status": "rate_limited"}
        # A migrated group's new chat id (in `describe`) is reported, never guessed.
        return {"index": r, "status": "rejected", "method": method, **describe(res)}

    def _ambiguous(self, attempt: Attempt, message_id: str, error: dict[str, Any]) -> None:
        def command(c: Any) -> None:
            messages.Message(message_id).set_status(c, MessageStatus.AMBIGUOUS, self._now())
            attempt.finish(c, AttemptOutcome.AMBIGUOUS, self._now(), error=error)
        self.db.write(command)

    # -- prompts -------------------------------------------------------------------------------

    async def _prompt(self, attempt: Attempt) -> None:
        from channels.telegram.sent import keyboard_messages

        p = self.db.read(lambda c: attempt.effect.payload(c))
        chat = str(p["chatId"])
        message_id = prompt_of(p)
        message = self.db.write(lambda c: messages.ensure_message(
            c, message_id, self.channel.channel_id, p["decisionId"], Purpose.PROMPT, p["text"],
            self._now()))
        existing = self.db.read(message.parts)
        if existing:
            if existing[0].is_intent:
                self._ambiguous(attempt, message_id, {"reason": "unsettled_intent"})
            else:
                self._finish(attempt, AttemptOutcome.APPLIED, result={"reused": True})
            return
        attempt = self._write_intent(attempt, message_id, 0, 0, p["text"], True)
        markup = {"force_reply": True, "selective": True}
        card = self.db.read(lambda c: dict(keyboard_messages(
            c, self.channel.channel_id, str(p["decisionId"])))).get(chat)
        res = await self.api.send_message(chat, p["text"], markup, p.get("threadId"),
                                          entities=p.get("entities"),
                                          reply_to=None if card is None else int(card),
                                          deadline=self.until(attempt))
        status = self._part_result(attempt, message_id, 0, 0, chat, res)
        if status is not None and status["status"] == "ambiguous":
            self._ambiguous(attempt, message_id, {**status, "chat": chat})
        elif status is None:
            ref = str(res.message_id)

            def confirm(c: Any) -> None:
                message.set_status(c, MessageStatus.CONFIRMED, self._now(),
                                   conversation_ref=chat, message_ref=ref)
                attempt.finish(c, AttemptOutcome.APPLIED, self._now())
            self.db.write(confirm)
        elif status["status"] == "rejected":
            self.db.write(lambda c: message.set_status(c, MessageStatus.FAILED, self._now()))
            self._finish(attempt, AttemptOutcome.REJECTED, error=status)

    # -- notices: one short message, intent first, never sent twice ---------------------------

    async def _notice(self, attempt: Attempt) -> None:
        p = self.db.read(lambda c: attempt.effect.payload(c))
        chat, text = str(p["chatId"]), str(p["text"])
        message_id = notice_message_id(self.channel.channel_id, str(p["key"]))
        message = self.db.write(lambda c: messages.ensure_message(
            c, message_id, self.channel.channel_id, p["decisionId"], Purpose.SETTLEMENT, text,
            self._now()))
        existing = self.db.read(message.parts)
        if existing:  # an earlier try: sent (done), or maybe sent (never again blindly)
            if existing[0].is_intent:
                self._ambiguous(attempt, message_id, {"reason": "unsettled_intent"})
            else:
                self._finish(attempt, AttemptOutcome.APPLIED, result={"reused": True})
            return
        attempt = self._write_intent(attempt, message_id, 0, 0, text, True)
        reply_to = p.get("replyTo")
        res = await self.api.send_message(chat, text, reply_to=reply_to if isinstance(
            reply_to, int) else None, deadline=self.until(attempt))
        status = self._part_result(attempt, message_id, 0, 0, chat, res)
        if status is None:
            def confirm(c: Any) -> None:
                message.set_status(c, MessageStatus.CONFIRMED, self._now())
                attempt.finish(c, AttemptOutcome.APPLIED, self._now())
            self.db.write(confirm)
        elif status["status"] == "rejected":
            self._finish(attempt, AttemptOutcome.REJECTED, error=status)

    # -- reminders: a short reply to each card, while the decision waits ----------------------

    async def _remind(self, attempt: Attempt) -> None:
        from channels.telegram.sent import keyboard_messages

        p = self.db.read(lambda c: attempt.effect.payload(c))
        decision_id, number = str(p["decisionId"]), int(p["number"])
        decision = self.db.read(lambda c: records.load(c, decision_id))
        if self.db.read(lambda c: records.resolution_of(c, decision_id)) is not None:
            self._finish(attempt, AttemptOutcome.APPLIED, result={"skipped": "resolved"})
            return  # never sent once the decision is settled
        message_id = reminder_message_id(self.channel.channel_id, decision_id, number)
        text = reminders.reminder_text(
            str(decision.request.document["title"]), fingerprint(
                decision.request.presentation_digest), decision.created_at,
            decision.deadline_at, reminders.default_label(decision), self._now())
        cards = self.db.read(lambda c: keyboard_messages(c, self.channel.channel_id,
                                                          decision_id))
        message = self.db.write(lambda c: messages.ensure_message(
            c, message_id, self.channel.channel_id, decision_id, Purpose.SETTLEMENT, text,
            self._now()))
        done = {p.recipient_index for p in self.db.read(message.parts)}
        for r, (chat, card) in enumerate(cards):
            if r in done:
                continue  # sent, or maybe sent: never again
            attempt = self._write_intent(attempt, message_id, r, 0, text, True)
            res = await self.api.send_message(chat, text, reply_to=int(card),
                                              deadline=self.until(attempt))
            status = self._part_result(attempt, message_id, r, 0, chat, res)
            if status is not None and status["status"] != "rejected":
                return  # that path recorded the attempt
        final = attempt

        def confirm(c: Any) -> None:  # the next one is reserved once it is due
            now = self._now()
            message.set_status(c, MessageStatus.CONFIRMED, now)
            final.finish(c, AttemptOutcome.APPLIED, now)
        self.db.write(confirm)
