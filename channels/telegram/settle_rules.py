"""When a settlement is done, tried again, or over: pure rules on its calls' results.

A settlement removes every keyboard of a decision and posts its outcome. It is never given up
for a 429 or a transient error (not sent, no answer, a server error, a refused token): it is
tried again, after what a 429 asked for or a growing backoff, until the keyboards are off.
Only a refusal for good (an error response that is none of those: the message can no longer
be edited, the bot was blocked) ends it, and that is reported to a person.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final, Literal

from channels.messages import Message
from channels.telegram.transport import CallOutcome, ProviderResult, describe

__all__ = ["maybe_acted", "record_post", "retry_in_ms", "settle_outcome", "token_rejected"]


_BACKOFF_MS: Final = 5_000  # after a transient failure, doubled per attempt
_MAX_BACKOFF_MS: Final = 600_000

_Outcome = Literal["applied", "retry", "refused"]


def _refused_for_good(res: ProviderResult) -> bool:
    """An error response that trying again cannot change (not a 429, a refused token or a
    server error)."""
    code = res.error_code or 0
    return res.outcome == CallOutcome.REJECTED and not res.is_rate_limited \
        and code not in (401, 404) and code < 500


def settle_outcome(failures: Sequence[ProviderResult]) -> tuple[_Outcome, dict[str, Any] | None]:
    """What the failed calls of one settlement attempt mean, and the attempt's error."""
    if not failures:
        return "applied", None
    if any(not _refused_for_good(res) for res in failures):
        return "retry", {"failures": len(failures)}
    return "refused", {"refused": [describe(res) for res in failures]}


def retry_in_ms(failures: Sequence[ProviderResult], attempt_number: int) -> int:
    """When to try again: when every 429 has passed and, after any other transient failure,
    a backoff that doubles with each attempt (5 s, 10 s, ... at most 10 min)."""
    waits = [math.ceil(float(res.retry_after or 1) * 1000) for res in failures
             if res.is_rate_limited]
    if any(not res.is_rate_limited and not _refused_for_good(res) for res in failures):
        waits.append(min(_MAX_BACKOFF_MS, _BACKOFF_MS * 2 ** min(max(attempt_number, 1) - 1, 10)))
    return max(waits, default=_BACKOFF_MS)


def record_post(c: Any, message_id: str, r: int, chat: str, res: ProviderResult) -> bool:
    """Record one outcome post in the confirm transaction; True when it was not posted (to
    be tried again, or refused for good)."""
    post = Message(message_id)
    if res.outcome == CallOutcome.OK and res.message_id is not None:
        post.confirm(c, r, 0, chat, str(res.message_id))
        return False
    if maybe_acted(res):
        return False  # maybe posted: the intent row stays, it is never posted twice
    post.unsend(c, r, 0)
    return True


def token_rejected(res: ProviderResult) -> bool:
    """401 (or 404, what the Bot API answers for an unknown token): the request was refused
    before anything was done, so nothing was sent."""
    return res.outcome == CallOutcome.REJECTED and res.error_code in (401, 404)


def maybe_acted(res: ProviderResult) -> bool:
    """The provider may have sent the message: a lost answer, an answer without the message,
    or a server error (5xx), which can come after the message went out."""
    if res.outcome in (CallOutcome.AMBIGUOUS, CallOutcome.OK):
        return True
    return res.outcome == CallOutcome.REJECTED and (res.error_code or 0) >= 500
