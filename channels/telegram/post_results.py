"""What a Bot API answer proves about a send: whether the provider may have acted, whether
a refused token means nothing was sent, and how an outcome post's answer is recorded."""

from __future__ import annotations

from typing import Any

from channels import messages
from channels.transport import AMBIGUOUS, NOT_SENT, OK, REJECTED, ProviderResult


def record_post(c: Any, message_id: str, r: int, chat: str, res: ProviderResult) -> int:
    """Record one outcome post in the confirm transaction; 1 when it should be tried again."""
    if res.outcome == OK and res.message_id is not None:
        messages.confirm_part(c, message_id, r, 0, chat, str(res.message_id))
        return 0
    if maybe_acted(res):
        return 0  # maybe posted: the intent row stays, it is never posted twice
    messages.remove_part_intent(c, message_id, r, 0)
    # Refused for good (blocked, chat gone): nothing to retry. Not sent, a refused token or
    # 429: retry.
    return 1 if res.outcome == NOT_SENT or res.is_rate_limited or token_rejected(res) else 0


def token_rejected(res: ProviderResult) -> bool:
    """401 (or 404, what the Bot API answers for an unknown token): the request was refused
    before anything was done, so nothing was sent."""
    return res.outcome == REJECTED and res.error_code in (401, 404)


def maybe_acted(res: ProviderResult) -> bool:
    """The provider may have sent the message: a lost answer, an answer without the message,
    or a server error (5xx), which can come after the message went out."""
    if res.outcome in (AMBIGUOUS, OK):
        return True
    return res.outcome == REJECTED and (res.error_code or 0) >= 500
