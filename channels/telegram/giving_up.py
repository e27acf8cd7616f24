"""An effect that hit a bug (or a refusal of its own) fails alone: it is settled so that it is
never retried forever and never re-sent blindly, and it is told in one line."""

from __future__ import annotations

import contextlib
from typing import Any

from channels.messages import MessageStatus
from channels.telegram.failures import Failure, failure
from channels.telegram.reservations import messages_of_effect
from channels.telegram.settle_rules import maybe_acted
from channels.telegram.transport import CallOutcome, ProviderResult, describe
from state.database import Database
from state.effects import Attempt, AttemptOutcome, Effect
from state.errors import StateError
from state.exit_codes import ExitCode
from state.leases import OwnerType

__all__ = ["give_up", "give_up_unbegun", "lost_post"]


def give_up(db: Database, channel_id: str, attempt: Attempt, exc: Exception,
            errors: list[dict[str, Any]]) -> Failure:
    """Settle the attempt: ambiguous when a part may have gone out, else failed for good
    (`status` lists both until an operator resends); the failure's line (a bug names its
    crash report)."""
    found = failure(exc, f"applying {attempt.effect.effect_type} {attempt.effect.effect_id}")
    error = {"internal" if found.internal else "description": found.line[:300]}
    errors.append({"method": attempt.effect.effect_type, **error})

    def settle(c: Any) -> None:
        now = db.clock.now_ms()
        written = messages_of_effect(c, channel_id, attempt.effect)
        maybe_sent = [m for m in written if m.has_intents(c)]
        for message in written:
            message.set_status(c, MessageStatus("ambiguous" if maybe_sent else "failed"), now)
        attempt.finish(c, AttemptOutcome("ambiguous" if maybe_sent else "rejected"), now,
                       error=error)

    with contextlib.suppress(StateError):  # already settled by the failing path
        db.write(settle)
    return found


def give_up_unbegun(db: Database, channel_id: str, effect: Effect, owner_id: str,
                    exc: Exception, errors: list[dict[str, Any]]) -> Failure | None:
    """A bug before the attempt could begin: begin a bare one, and give it up."""
    try:
        attempt = db.write(lambda c: effect.begin_attempt(
            c, OwnerType.CHANNEL, owner_id, db.clock.now_ms(), db.entropy))
    except StateError:
        return None
    return give_up(db, channel_id, attempt, exc, errors)


def lost_post(decision_id: str, chat: str, res: ProviderResult) -> list[Failure]:
    """The line for an outcome post whose answer was lost (it may have arrived), if it was."""
    if not maybe_acted(res) or (res.outcome == CallOutcome.OK and res.message_id is not None):
        return []
    return [Failure(f"{decision_id}: its outcome post to chat {chat} may not have arrived (its"
                    f" answer was lost: {describe(res).get('description')}); check that chat:"
                    " it is never posted twice", ExitCode.TEMPORARY)]
