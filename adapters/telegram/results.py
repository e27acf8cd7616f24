"""The classified outcome of one Bot API call, and the rules that classify it.

Each call ends in a ``CallResult`` whose ``outcome`` decides what the caller
may do next (ARCHITECTURE §5, facts B and C):

* ``ok``: the Bot API answered ``ok: true`` with the result the method promises.
* ``not_sent``: the request provably never reached the server (connect error,
  connect timeout, pool timeout). Safe to retry.
* ``ambiguous``: the request may have been acted on (write/read timeout, a
  dropped or reset connection, a body that is not JSON, ``ok: true`` without the
  promised result). Never retried: a second sendMessage could duplicate.
* ``rejected``: the Bot API answered with ``error_code`` and ``description``.
  429 carries ``retry_after``; 409 means another poller or a webhook.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx

from adapters.telegram.body import Scrub, load_body
from adapters.telegram.http import PoolClosed
from channels.telegram.transport import CallOutcome

__all__ = [
    "MAX_DESCRIPTION", "CallOutcome", "CallResult", "JSONDict", "classify_exception",
    "classify_response", "retry_after_seconds",
]


JSONDict = dict[str, Any]

# Every retry_after is honoured, however long (a flood ban can last hours or days); beyond a
# year it is taken as a year, so no later arithmetic overflows an SQLite integer.
_MAX_RETRY_AFTER: Final = 366 * 86_400
MAX_DESCRIPTION: Final = 500
_MAX_ID: Final = 2**53 - 1  # Bot API integers have at most 52 significant bits

# httpx failures that happen before any request byte leaves (facts C).
_NOT_SENT_ERRORS: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass(frozen=True, slots=True)
class CallResult:
    """The classified outcome of one Bot API call (after any retries)."""

    method: str
    outcome: CallOutcome
    result: Any = None  # the Bot API `result` (dict, list or bool) when ok
    error_code: int | None = None
    description: str | None = None
    retry_after: int | float | None = None  # seconds, from parameters.retry_after
    migrate_to_chat_id: int | None = None
    attempts: int = 1
    # A 2xx response whose body is not the Bot API answer the method promises: the same bytes
    # would come back on a retry, so the caller must say so rather than wait for them to change.
    malformed: bool = False

    @property
    def ok(self) -> bool:
        """True when the Bot API confirmed the call."""
        return self.outcome is CallOutcome.OK

    @property
    def is_conflict(self) -> bool:
        """409: another getUpdates poller, or a webhook, holds the bot."""
        return self.outcome is CallOutcome.REJECTED and self.error_code == 409

    @property
    def is_rate_limited(self) -> bool:
        """429 Too Many Requests (``retry_after`` says for how long)."""
        return self.outcome is CallOutcome.REJECTED and self.error_code == 429

    @property
    def is_message_not_modified(self) -> bool:
        """400 "message is not modified": an edit that changes nothing (a success)."""
        return self._rejected_with("message is not modified")

    @property
    def is_message_to_edit_not_found(self) -> bool:
        """400 "message to edit not found": nothing left to edit (a success)."""
        return self._rejected_with("message to edit not found")

    def _rejected_with(self, phrase: str) -> bool:
        text = (self.description or "").lower()
        return self.outcome is CallOutcome.REJECTED and phrase in text

    @property
    def message_id(self) -> int | None:
        """``message_id`` of a Message result, if this call returned one."""
        if isinstance(self.result, dict) and isinstance(self.result.get("message_id"), int):
            return int(self.result["message_id"])
        return None

    @property
    def updates(self) -> list[Any]:
        """The raw batch items of a successful getUpdates (empty otherwise); an item may be
        malformed (not an object, no usable update_id): the update parser decides."""
        if self.ok and isinstance(self.result, list):
            return list(self.result)
        return []


def retry_after_seconds(value: object) -> int | float | None:
    """``retry_after`` in seconds from the Bot API's number (None for anything else)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return min(value, _MAX_RETRY_AFTER) if math.isfinite(value) else _MAX_RETRY_AFTER
    return None


def _chat_id(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= _MAX_ID:
        return value
    return None


def _provider_text(value: object, fallback: str) -> str:
    """A provider's text as something every output can take: valid Unicode, bounded."""
    if not isinstance(value, str):
        return fallback
    return value.encode("utf-8", "replace").decode("utf-8")[:MAX_DESCRIPTION]


def _is_message(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("message_id"), int)
        and isinstance(value.get("chat"), dict)
        and isinstance(value["chat"].get("id"), int)
    )


def _is_list(value: object) -> bool:
    # Each item is checked by the update parser: a malformed item is data, not a bad batch.
    return isinstance(value, list)


def _is_user(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("id"), int)


def _is_true(value: object) -> bool:
    return value is True


def _is_anything(value: object) -> bool:
    return True


def _is_message_or_true(value: object) -> bool:
    return value is True or _is_message(value)


# What a successful result must look like, per method; anything else is ambiguous.
_EXPECTED: Final[Mapping[str, Callable[[object], bool]]] = {
    "getMe": _is_user,
    "getUpdates": _is_list,
    "sendMessage": _is_message,
    "sendDocument": _is_message,
    "editMessageReplyMarkup": _is_message_or_true,
    "answerCallbackQuery": _is_true,
    "deleteWebhook": _is_true,
}


def classify_response(
    method: str, status: int, payload: bytes, scrub: Scrub | None = None
) -> CallResult:
    """Classify an HTTP response from the Bot API; ``scrub`` removes secrets from every
    decoded string (the raw bytes must already be scrubbed)."""
    try:
        body = load_body(payload, scrub)
    except ValueError:
        body = None
    if not isinstance(body, dict) and status == 413:
        # The proxy in front of the Bot API refused the body's size (nginx's own page): the
        # request never reached the Bot API, so nothing was done.
        return CallResult(method, CallOutcome.REJECTED, error_code=413,
                          description="Request Entity Too Large")
    if not isinstance(body, dict):
        return _ambiguous(method, status, f"unreadable response (HTTP {status})")
    if body.get("ok") is True:
        return _classify_success(method, status, body)
    if body.get("ok") is False:
        return _rejection(method, status, body)
    return _ambiguous(method, status, f"response without ok (HTTP {status})")


def _ambiguous(method: str, status: int, description: str) -> CallResult:
    return CallResult(method, CallOutcome.AMBIGUOUS, description=description,
                      malformed=200 <= status < 300)


def _classify_success(method: str, status: int, body: JSONDict) -> CallResult:
    expected = _EXPECTED.get(method, _is_anything)
    if 200 <= status < 300 and "result" in body and expected(body["result"]):
        return CallResult(method, CallOutcome.OK, result=body["result"])
    return _ambiguous(method, status, f"ok response without the expected result (HTTP {status})")


def _rejection(method: str, status: int, body: JSONDict) -> CallResult:
    code = body.get("error_code")
    description = body.get("description")
    raw_params = body.get("parameters")
    params: JSONDict = raw_params if isinstance(raw_params, dict) else {}
    migrate = params.get("migrate_to_chat_id")
    return CallResult(
        method,
        CallOutcome.REJECTED,
        error_code=_error_code(code, status),
        description=_provider_text(description, f"HTTP {status}"),
        retry_after=retry_after_seconds(params.get("retry_after")),
        migrate_to_chat_id=_chat_id(migrate),
    )


def _error_code(code: object, status: int) -> int | None:
    """The body's error_code, else the HTTP status when it is an error status."""
    if isinstance(code, int) and not isinstance(code, bool) and 0 <= code < 1000:
        return code
    return status if status >= 400 else None


def classify_exception(method: str, exc: BaseException) -> CallResult:
    """Classify a transport failure by the httpx error (`setup_bot` passes the one PTB's error
    wraps)."""
    if isinstance(exc, _NOT_SENT_ERRORS) or _pool_refused(exc):
        return CallResult(method, CallOutcome.NOT_SENT, description=_describe(exc))
    return CallResult(method, CallOutcome.AMBIGUOUS, description=_describe(exc))


# httpx's own refusal, raised before anything is written: its client has been closed. It has
# no type of its own; only python-telegram-bot's pool (`setup telegram`) can raise it, as ours
# refuses first with PoolClosed.
_HTTPX_POOL_REFUSAL: Final = "Cannot send a request"


def _pool_refused(exc: BaseException) -> bool:
    """Only the connection pool's own "could not send" proves nothing left. Any other
    RuntimeError (RecursionError, NotImplementedError, "Event loop is closed") is a bug on
    the way, after which the request may have gone out: ambiguous, never resent by itself."""
    return isinstance(exc, PoolClosed) or (
        type(exc) is RuntimeError and str(exc).startswith(_HTTPX_POOL_REFUSAL))


def _describe(exc: BaseException) -> str:
    """``httpx.ReadTimeout`` or ``httpx.ConnectError: <message>``: class first, text if any."""
    module = "httpx." if isinstance(exc, httpx.HTTPError) else ""
    text = str(exc)
    return f"{module}{type(exc).__name__}: {text}" if text else f"{module}{type(exc).__name__}"
