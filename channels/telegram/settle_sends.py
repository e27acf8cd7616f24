"""Applying a settlement: a resolved decision's keyboards settled (the chosen button marked,
every button inert) and its outcome posted, in each chat that got its card (`outbound` claims
the effect and calls these; `settle_rules` holds the rules on what the calls' results mean).

One intent commit (the attempt and an intent row per outcome post), the sends (keyboard edits
need no intent: settling a keyboard twice is harmless, "not modified"), one confirm commit
(the posts' references or removed intents, the message status, the attempt's outcome). A
crash in between leaves the intents: the outcome post is ambiguous, never posted twice.
"""

from __future__ import annotations

from typing import Any, Protocol

import apsw

from channels import messages
from channels.decisions import records, views
from channels.messages import MessageStatus, Purpose
from channels.telegram import giving_up, outcomes
from channels.telegram.buttons import settled_keyboard
from channels.telegram.failures import Failure
from channels.telegram.identity import Channel
from channels.telegram.plans import Settlement
from channels.telegram.sent import cards_and_recipients
from channels.telegram.settle_rules import record_post, retry_in_ms, settle_outcome, token_rejected
from channels.telegram.transport import BotApi, CallOutcome, ProviderResult
from state import effects
from state.database import Database
from state.effects import Attempt

__all__ = ["intents", "settle"]


class _Sender(Protocol):
    """What a settlement's sends need of the channel's outbound (`outbound.Outbound`)."""

    db: Database
    api: BotApi
    # The Bot API refused the token: the pass applies no more effects.
    unauthorized: bool
    failures: list[Failure]  # effects that failed alone
    refused: list[dict[str, Any]]  # settlements refused for good

    def until(self, attempt: Attempt) -> float: ...  # epoch seconds by which a call ends

    def renew_if_due(self, attempt: Attempt) -> Attempt: ...

    def note_error(self, method: str, res: ProviderResult) -> None: ...


def intents(c: apsw.Connection, channel: Channel, attempt: Attempt, now: int) -> Settlement:
    """What the settlement will send, its posts' intents written (in the attempt's begin
    transaction: one commit before the sends)."""
    decision_id = records.decision_of_resource(attempt.effect.source_resource_id)
    channel_id = channel.channel_id
    # Telegram's own outcome post (who answered, how, when), not the channel-neutral text.
    decision = records.load(c, decision_id)
    resolution = records.resolution_of(c, decision_id)
    post = outcomes.outcome_post(c, channel, decision, now, resolution)
    markup = settled_keyboard(decision.request, None if resolution is None else resolution.choice)
    message_id = messages.message_id_for(channel_id, Purpose.SETTLEMENT, decision_id)
    message = messages.ensure_message(c, message_id, channel_id, decision_id, Purpose.SETTLEMENT,
                                      post.text, now)
    done = {part.recipient_index for part in message.parts(c)}
    keyboards, recipients = cards_and_recipients(c, channel_id, decision_id)
    cards = dict(keyboards)  # the post replies to the card it settles, in each chat
    removed = _removed_before(c, attempt, keyboards)
    posts = [(r, chat, cards.get(chat)) for r, chat in recipients
             if r not in done]  # posted, or ambiguous: never posted twice
    for r, _, _ in posts:
        message.write_intent(c, r, 0, post.text, now)
    return Settlement(decision_id, message_id, post, [k for k in keyboards if k not in removed],
                      markup, posts, removed)


def _removed_before(c: apsw.Connection, attempt: Attempt,
                    keyboards: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The keyboards an earlier attempt of this settlement settled (its error names them):
    a retry edits only the others, so a chat's pace spent on edits done already cannot keep
    the outcome posts from ever fitting in a pass."""
    if attempt.attempt_number <= 1:
        return []
    error = attempt.effect.error(c)
    gone = error.get("keyboardsRemoved", []) if isinstance(error, dict) else []
    return [k for k in keyboards if [k[0], k[1]] in gone]


async def settle(out: _Sender, attempt: Attempt, s: Settlement) -> None:
    """The keyboard edits and the outcome posts, then the one confirm commit."""
    edits: list[ProviderResult] = []  # the keyboard edits that did not settle one
    removed = list(s.removed)
    for chat, message_ref in s.keyboards:
        attempt = out.renew_if_due(attempt)
        res = await out.api.edit_message_reply_markup(chat, int(message_ref),
                                                      reply_markup=s.markup,
                                                      deadline=out.until(attempt))
        if not (res.outcome == CallOutcome.OK or res.is_message_not_modified
                or res.is_message_to_edit_not_found):
            out.note_error("editMessageReplyMarkup", res)
            out.unauthorized = out.unauthorized or token_rejected(res)
            edits.append(res)  # "not modified"/"not found": nothing left to settle
        else:
            removed.append((chat, message_ref))
    sent: list[tuple[int, str, ProviderResult]] = []
    for r, chat, card in s.posts:
        attempt = out.renew_if_due(attempt)
        res = await out.api.send_message(
            chat, s.post.text, entities=s.post.entities,
            reply_to=None if card is None else int(card), deadline=out.until(attempt))
        if not (res.outcome == CallOutcome.OK and res.message_id is not None):
            out.note_error("sendMessage", res)
            out.unauthorized = out.unauthorized or token_rejected(res)
        sent.append((r, chat, res))
        out.failures += giving_up.lost_post(s.decision_id, chat, res)
    final = attempt

    def confirm(c: apsw.Connection) -> None:
        now = out.db.clock.now_ms()
        posts = [res for r, chat, res in sent if record_post(c, s.message_id, r, chat, res)]
        # A post whose answer was lost keeps its intent row: ambiguous, never confirmed.
        message = messages.Message(s.message_id)
        unknown = message.has_intents(c)
        status = MessageStatus("pending" if posts else "ambiguous" if unknown else "confirmed")
        message.set_status(c, status, now)
        # Never given up for a 429 or a transient error: tried again (after what a 429
        # asked for) until the keyboards are off; only a refusal for good ends it.
        outcome, error = settle_outcome([*edits, *posts])
        if outcome == "retry" and removed:  # the next attempt edits only the others
            error = {**(error or {}), "keyboardsRemoved": [list(k) for k in removed]}
        retry_at = None if outcome != "retry" else \
            now + retry_in_ms([*edits, *posts], final.attempt_number)
        if outcome == "refused":
            out.refused.append({"decisionId": s.decision_id, **(error or {}),
                                "fingerprint": views.fingerprint_of(c, s.decision_id)})
        done = effects.AttemptOutcome(("ambiguous" if unknown else "applied")
                                      if outcome == "applied" else "rejected")
        final.finish(c, done, now, error=error, retry_at=retry_at)
    out.db.write(confirm)
