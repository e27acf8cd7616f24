"""How a poll pass ended (PassStatus), and why one ends early on a getUpdates answer: its
status, line and error (pure)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from channels.telegram.transport import ProviderResult, describe

__all__ = ["PassStatus", "conflict", "refused", "unconfirmable"]


class PassStatus(StrEnum):
    """A channel's pass (`ChannelReport.status`, the `status` of `poll --json`)."""

    POLLED = "polled"
    BUSY = "busy"  # another poller holds the channel
    CONFLICT = "conflict"  # a 409: a webhook, or another poller on the token
    UNAUTHORIZED = "unauthorized"  # the token was refused
    BAD_BATCH = "bad_batch"  # a getUpdates answer that cannot be stored or confirmed
    SHARED_BOT = "shared_bot"  # another profile polls this bot
    FAILED = "failed"  # its claim, release or a step failed


_Ending = tuple[PassStatus, str, dict[str, Any]]  # (status, message, error)


def refused(res: ProviderResult, offset: int | None) -> _Ending:
    """An answer that is not a batch: nothing was stored and the cursor stays."""
    return (PassStatus.BAD_BATCH,
            f"getUpdates returned a response that is not a batch of updates"
            f" ({res.description}); nothing was stored and the cursor stays"
            f" at {offset if offset is not None else 'the start'}",
            {"method": "getUpdates", **describe(res)})


def unconfirmable(count: int) -> _Ending:
    """A batch whose items carry no usable update_id past the cursor: they were recorded (and
    are processed, as ignored), but no offset can confirm them, so Telegram sends them again
    at once: the pass ends after processing."""
    message = (f"getUpdates returned {count} update(s) without a usable update_id past the"
               " cursor; they were recorded as ignored, and the cursor moves on when a later"
               " update arrives")
    return PassStatus.BAD_BATCH, message, {"method": "getUpdates", "outcome": "unconfirmable",
                                  "description": message}


def conflict(res: ProviderResult) -> _Ending:
    """A 409: a webhook, or another poller on the same token."""
    webhook = "webhook" in (res.description or "").lower()
    return (PassStatus.CONFLICT,
            "a webhook is active for this bot; delete it to poll (piw-channels setup telegram"
            " ... --delete-webhook)"
            if webhook else
            "another getUpdates poller is using this bot token; run only one poller per bot",
            {"method": "getUpdates", **describe(res)})
