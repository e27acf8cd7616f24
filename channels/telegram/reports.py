"""What a poll pass is asked to do (`PollOptions`) and what one channel's pass did
(`ChannelReport`): the poll cycle's input and output, read by the CLI and the tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from channels.telegram import alerts
from channels.telegram.ended import PassStatus
from channels.telegram.failures import Failure

__all__ = ["ChannelReport", "PollOptions"]


_LONG_POLL_SECONDS = 20


@dataclass(frozen=True, slots=True)
class PollOptions:
    """`poll --once` (the default) or `poll --for SECONDS`, optionally one profile."""

    window_seconds: float = 0.0
    profile: str | None = None
    long_poll_seconds: int = _LONG_POLL_SECONDS
    alert_after_ms: int = alerts.DEFAULT_ALERT_AFTER_MS

    @property
    def once(self) -> bool:
        return self.window_seconds <= 0


@dataclass
class ChannelReport:
    """What one channel's pass did (counts and codes only: no ids)."""

    channel: str
    status: PassStatus = PassStatus.POLLED
    updates: int = 0
    processed: int = 0
    effects: int = 0
    message: str = ""
    errors: list[dict[str, Any]] = field(default_factory=list)
    updates_ok_at: int | None = None  # the last successful getUpdates of this pass
    updates_error: dict[str, Any] | None = None  # the last getUpdates, when it failed
    alerts: alerts.AlertReport | None = None  # what needs a person (None: not polled)
    exit_code: int = 0  # of a failed pass (PassStatus.FAILED)
    failure: Failure | None = None  # why the pass failed (PassStatus.FAILED)
    problems: list[Failure] = field(default_factory=list)  # rows and effects that failed alone
    # Settlements refused for good (a keyboard that cannot come off): a line each, this pass.
    refused: list[dict[str, Any]] = field(default_factory=list)
