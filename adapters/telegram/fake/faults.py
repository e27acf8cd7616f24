"""Faults a test programs into the fake: what goes wrong, and for how many requests.

The Bot API errors a test can inject by name are one table, ``BotError``;
``Fault.canned(BotError.BLOCKED)`` answers exactly as the Bot API would.
"""

from __future__ import annotations

import base64
import dataclasses
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, Final

from adapters.telegram.fake.constants import (
    DESC_BLOCKED,
    DESC_CHAT_NOT_FOUND,
    DESC_CONFLICT_POLL,
    DESC_CONFLICT_WEBHOOK,
    DESC_EDIT_NOT_FOUND,
    DESC_MIGRATED,
    DESC_NOT_MODIFIED,
    DESC_QUERY_TOO_OLD,
    DESC_TOO_MANY_REQUESTS,
    DESC_UNAUTHORIZED,
)
from adapters.telegram.fake.wire import canonical, dumps, error_body

__all__ = ["ANY_METHOD", "BotError", "Fault", "FaultKind", "FaultQueue"]


ANY_METHOD: Final = "*"


class FaultKind(StrEnum):
    """What the server does instead of (or before) answering normally."""

    RESPOND = "respond"  # send the canned status and body
    DROP = "drop"  # read the whole request, then close without a response
    RESET = "reset"  # close with a TCP reset before reading the body
    HANG = "hang"  # hold the request until release() or shutdown, then answer normally
    DELAY = "delay"  # answer normally after `seconds`
    LOSE = "lose"  # act on the request (a message is sent), then close without a response


class BotError(Enum):
    """Bot API errors without parameters: (error_code, description) as the server sends them."""

    CONFLICT = (409, DESC_CONFLICT_POLL)  # another getUpdates poller terminated this one
    WEBHOOK_CONFLICT = (409, DESC_CONFLICT_WEBHOOK)  # getUpdates while a webhook is set
    CHAT_NOT_FOUND = (400, DESC_CHAT_NOT_FOUND)
    NOT_MODIFIED = (400, DESC_NOT_MODIFIED)  # treated as success by settlement
    EDIT_NOT_FOUND = (400, DESC_EDIT_NOT_FOUND)
    QUERY_TOO_OLD = (400, DESC_QUERY_TOO_OLD)  # a late answerCallbackQuery
    BLOCKED = (403, DESC_BLOCKED)  # the user blocked the bot
    UNAUTHORIZED = (401, DESC_UNAUTHORIZED)  # a revoked token

    @property
    def error_code(self) -> int:
        """The HTTP status and ``error_code``."""
        return int(self.value[0])

    @property
    def description(self) -> str:
        """The exact ``description``."""
        return str(self.value[1])


@dataclass(frozen=True, slots=True)
class Fault:
    """One programmed misbehaviour, applied to the next ``times`` matching requests."""

    kind: FaultKind
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    seconds: float = 0.0
    times: int = 1

    @classmethod
    def error(
        cls,
        error_code: int,
        description: str,
        parameters: Mapping[str, object] | None = None,
        *,
        times: int = 1,
    ) -> Fault:
        """An error response exactly as the Bot API shapes it."""
        body = error_body(error_code, description, parameters)
        return cls(FaultKind.RESPOND, status=error_code, body=body, times=times)

    @classmethod
    def canned(cls, error: BotError, *, times: int = 1) -> Fault:
        """One of the Bot API errors in the ``BotError`` table."""
        return cls.error(error.error_code, error.description, times=times)

    @classmethod
    def too_many_requests(cls, retry_after: int = 1, *, times: int = 1) -> Fault:
        """429 with ``parameters.retry_after``."""
        desc = DESC_TOO_MANY_REQUESTS.format(retry_after)
        return cls.error(429, desc, {"retry_after": retry_after}, times=times)

    @classmethod
    def migrated(cls, migrate_to_chat_id: int, *, times: int = 1) -> Fault:
        """400 group upgraded to a supergroup, with ``parameters.migrate_to_chat_id``."""
        params = {"migrate_to_chat_id": migrate_to_chat_id}
        return cls.error(400, DESC_MIGRATED, params, times=times)

    @classmethod
    def ok_result(cls, result: object, *, times: int = 1) -> Fault:
        """``ok: true`` with the given (typically wrong or empty) result."""
        body = dumps({"ok": True, "result": result})
        return cls(FaultKind.RESPOND, body=body, times=times)

    @classmethod
    def ok_without_result(cls, *, times: int = 1) -> Fault:
        """``ok: true`` and no result field at all."""
        return cls(FaultKind.RESPOND, body=dumps({"ok": True}), times=times)

    @classmethod
    def non_json(
        cls, body: bytes = b"<html><body>502 Bad Gateway</body></html>", status: int = 200,
        *, times: int = 1,
    ) -> Fault:  # fmt: skip
        """A body that is not JSON (a proxy's error page, a truncated answer)."""
        return cls(FaultKind.RESPOND, status, body, "text/html", times=times)

    @classmethod
    def drop(cls, *, times: int = 1) -> Fault:
        """Read the request, then close the connection without any response."""
        return cls(FaultKind.DROP, times=times)

    @classmethod
    def lose(cls, *, times: int = 1) -> Fault:
        """Carry the request out, then close without a response (a lost send response)."""
        return cls(FaultKind.LOSE, times=times)

    @classmethod
    def reset(cls, *, times: int = 1) -> Fault:
        """Reset the connection (RST) right after the request head."""
        return cls(FaultKind.RESET, times=times)

    @classmethod
    def hang(cls, *, times: int = 1) -> Fault:
        """Hold the request until ``release()``, then answer it normally."""
        return cls(FaultKind.HANG, times=times)

    @classmethod
    def delay(cls, seconds: float, *, times: int = 1) -> Fault:
        """Answer normally, but only after ``seconds``."""
        return cls(FaultKind.DELAY, seconds=seconds, times=times)

    def to_json(self) -> dict[str, object]:
        """Plain JSON form, for the control endpoint."""
        data = dataclasses.asdict(self)
        data["kind"] = self.kind.value
        data["body"] = base64.b64encode(self.body).decode("ascii")
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fault:
        """Inverse of ``to_json``."""
        return cls(
            kind=FaultKind(data["kind"]),
            status=int(data.get("status", 200)),
            body=base64.b64decode(data.get("body", "")),
            content_type=str(data.get("content_type", "application/json")),
            seconds=float(data.get("seconds", 0.0)),
            times=int(data.get("times", 1)),
        )


@dataclass(slots=True)
class _Armed:
    """A queued fault and how many more requests it applies to."""

    fault: Fault
    remaining: int


class FaultQueue:
    """Faults queued per method (or for ``ANY_METHOD``), taken in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: dict[str, deque[_Armed]] = {}

    def inject(self, method: str, fault: Fault) -> None:
        """Queue a fault for the next ``fault.times`` requests of ``method``."""
        if fault.times < 1:
            raise ValueError("a fault must apply at least once")
        with self._lock:
            queue = self._faults.setdefault(canonical(method), deque())
            queue.append(_Armed(fault, fault.times))

    def clear(self) -> None:
        """Forget every queued fault."""
        with self._lock:
            self._faults.clear()

    def take(self, method: str) -> Fault | None:
        """The fault for this request of ``method``, if one is queued."""
        with self._lock:
            for key in (method, ANY_METHOD):
                queue = self._faults.get(key)
                if queue:
                    armed = queue[0]
                    armed.remaining -= 1
                    if armed.remaining <= 0:
                        queue.popleft()
                    return armed.fault
        return None
