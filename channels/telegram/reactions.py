"""A reaction on a person's text answer as its receipt: 👍 on the reply that won.

A button press is answered on the button (answerCallbackQuery); a typed answer has no spinner,
so the reply itself gets a reaction once its answer is accepted. Setting the same reaction
twice changes nothing, so it needs no intent row; a receipt is a courtesy, so a refusal (a
chat where reactions are off, a message deleted meanwhile) is recorded and never reported.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

import apsw

from channels.decisions import records
from channels.telegram.identity import Channel
from channels.telegram.transport import BotApi, CallOutcome, ProviderResult, describe
from state import effects
from state.database import Database
from state.effects import Attempt, AttemptOutcome, OwnerScope
from state.resources import Actor

__all__ = ["REACT", "apply", "reserve_receipt"]


REACT: Final = "telegram.react"
_RECEIPT: Final = "👍"  # one of the reactions every chat allows by default
_RETRIES: Final = 5  # a provably unsent reaction is tried again this many times
_BACKOFF_MS: Final = 5_000


class _Outbound(Protocol):
    """What a reaction needs of the channel's outbound (`outbound.Outbound`)."""

    db: Database
    api: BotApi
    unauthorized: bool

    def until(self, attempt: Attempt) -> float: ...

    def note_error(self, method: str, res: ProviderResult) -> None: ...


def reserve_receipt(conn: apsw.Connection, channel: Channel, decision_id: str, chat: str,
                    message_id: int, worker: Actor, now: int) -> None:
    """Reserve the receipt on the reply `message_id` in `chat` (once per reply)."""
    resource_id = records.decision_resource(decision_id)
    effects.reserve(
        conn, source_resource_id=resource_id, effect_type=REACT,
        idempotency_key=f"{channel.channel_id}:react:{chat}:{message_id}",
        payload={"decisionId": decision_id, "channelId": channel.channel_id, "chatId": chat,
                 "messageId": message_id, "emoji": _RECEIPT},
        owner_scope=OwnerScope.CHANNEL, actor=worker, now=now)


async def apply(out: _Outbound, attempt: Attempt) -> None:
    """Set the reaction, and record what came of it."""
    p = out.db.read(lambda c: attempt.effect.payload(c))
    res = await out.api.set_message_reaction(str(p["chatId"]), int(p["messageId"]),
                                             str(p["emoji"]), deadline=out.until(attempt))
    outcome, retry_in = _outcome(res, attempt.attempt_number)
    if outcome != AttemptOutcome.APPLIED:
        out.note_error("setMessageReaction", res)
        out.unauthorized = out.unauthorized or (res.error_code in (401, 404))
    error: Any = None if outcome == AttemptOutcome.APPLIED else describe(res)

    def finish(c: apsw.Connection) -> None:
        now = out.db.clock.now_ms()
        attempt.finish(c, outcome, now, error=error,
                       retry_at=None if retry_in is None else now + retry_in)
    out.db.write(finish)


def _outcome(res: ProviderResult, attempt_number: int) -> tuple[AttemptOutcome, int | None]:
    """Applied; tried again later, while tries are left, when it did nothing (not sent, a
    429, a refused token) or a server error left it unknown (setting the same reaction again
    changes nothing); ambiguous when the answer was lost; else refused for good."""
    if res.outcome == CallOutcome.OK:
        return AttemptOutcome.APPLIED, None
    if res.outcome == CallOutcome.AMBIGUOUS:
        return AttemptOutcome.AMBIGUOUS, None
    code = res.error_code or 0
    transient = res.outcome == CallOutcome.NOT_SENT or res.is_rate_limited or code in (401, 404) \
        or code >= 500
    if transient and attempt_number < _RETRIES:
        wait = int(float(res.retry_after or 0) * 1000) or _BACKOFF_MS * attempt_number
        return AttemptOutcome.REJECTED, wait
    return AttemptOutcome.REJECTED, None
