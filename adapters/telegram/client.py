"""Telegram Bot API client that classifies every call instead of raising.

Each call returns a ``CallResult`` whose ``outcome`` decides what the caller
may do next (ARCHITECTURE §5, facts B and C):

* ``ok``: the Bot API answered ``ok: true`` with the result the method promises.
* ``not_sent``: the request provably never reached the server (connect error,
  connect timeout, pool timeout). Safe to retry, and retried here.
* ``ambiguous``: the request may have been acted on (write/read timeout, a
  dropped or reset connection, a body that is not JSON, ``ok: true`` without the
  promised result). Never retried: a second sendMessage could duplicate.
* ``rejected``: the Bot API answered with ``error_code`` and ``description``.
  429 carries ``retry_after`` and is retried after that long; 409 means another
  poller or a webhook.

The transport is python-telegram-bot's ``HTTPXRequest``, driven through its
``do_request`` so the raw status and body can be classified. ``telegram.Bot``'s
methods are deliberately not used: its ``repr`` and its debug log contain the
token, its ``post`` keeps only ``result`` (``ok: false`` with HTTP 200 becomes a
``KeyError``, exact descriptions and error codes are rewritten), and reading
``RetryAfter.retry_after`` emits a deprecation warning in v22.

The bot token travels only inside request URLs. It never appears in results,
exceptions or ``repr``; ``install_log_redaction`` removes it from the records
of httpx, httpcore and python-telegram-bot, which log request URLs.
"""

from __future__ import annotations

import asyncio
import datetime as dtm
import functools
import json
import logging
import re
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from types import TracebackType
from typing import Any, Final, Self
from urllib.parse import quote, urlsplit

import httpx
from telegram import TelegramObject
from telegram.error import TelegramError
from telegram.request import BaseRequest, HTTPXRequest, RequestData
from telegram.request._requestparameter import RequestParameter
from tenacity import AsyncRetrying, RetryCallState, retry_if_result, stop_after_attempt
from tenacity.stop import stop_base
from tenacity.wait import wait_base, wait_exponential

from adapters.telegram.errors import ClientClosedError, InvalidTokenFormat

__all__ = [
    "DEFAULT_ALLOWED_UPDATES",
    "DEFAULT_API_BASE_URL",
    "CallResult",
    "Outcome",
    "TelegramClient",
    "install_log_redaction",
    "redact",
    "retry_after_seconds",
]

JSONDict = dict[str, Any]
Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]

DEFAULT_API_BASE_URL: Final = "https://api.telegram.org"
DEFAULT_ALLOWED_UPDATES: Final = ("message", "callback_query")
REDACTED: Final = "<redacted>"
# A real token is "<bot id>:<35 URL-safe characters>"; anything else could
# change the request path, so it is refused rather than encoded.
_TOKEN_FORMAT: Final = re.compile(r"[0-9]+:[A-Za-z0-9_-]+")
# Loggers that format request URLs (httpx's INFO "HTTP Request: POST <url>",
# PTB's "Set Bot API URL") or may in a future version.
_URL_LOGGERS: Final = (
    "httpx",
    "httpcore.connection",
    "httpcore.connection_pool",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "telegram.Bot",
    "telegram.request.BaseRequest",
    "telegram.request.HTTPXRequest",
)
# httpx failures that happen before any request byte leaves (facts C).
_NOT_SENT_ERRORS: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)

_LOG = logging.getLogger(__name__)


class Outcome(StrEnum):
    """What a Bot API call provably did."""

    OK = "ok"
    NOT_SENT = "not_sent"
    AMBIGUOUS = "ambiguous"
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class CallResult:
    """The classified outcome of one Bot API call (after any retries)."""

    method: str
    outcome: Outcome
    result: Any = None  # the Bot API `result` (dict, list or bool) when ok
    error_code: int | None = None
    description: str | None = None
    retry_after: int | float | None = None  # seconds, from parameters.retry_after
    migrate_to_chat_id: int | None = None
    attempts: int = 1

    @property
    def ok(self) -> bool:
        """True when the Bot API confirmed the call."""
        return self.outcome is Outcome.OK

    @property
    def is_conflict(self) -> bool:
        """409: another getUpdates poller, or a webhook, holds the bot."""
        return self.outcome is Outcome.REJECTED and self.error_code == 409

    @property
    def is_rate_limited(self) -> bool:
        """429 Too Many Requests (``retry_after`` says for how long)."""
        return self.outcome is Outcome.REJECTED and self.error_code == 429

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
        return self.outcome is Outcome.REJECTED and phrase in text

    @property
    def message_id(self) -> int | None:
        """``message_id`` of a Message result, if this call returned one."""
        if isinstance(self.result, dict) and isinstance(self.result.get("message_id"), int):
            return int(self.result["message_id"])
        return None

    @property
    def updates(self) -> list[JSONDict]:
        """The raw update dicts of a successful getUpdates (empty otherwise)."""
        if self.ok and isinstance(self.result, list):
            return list(self.result)
        return []


# --------------------------------------------------------------------------- redaction


def redact(text: str, token: str) -> str:
    """Replace the token (raw or URL-quoted) in text with ``<redacted>``."""
    if not token:
        return text
    return text.replace(token, REDACTED).replace(quote(token, safe=""), REDACTED)


class _TokenRedactingFilter(logging.Filter):
    """Rewrites log records so no registered token survives formatting."""

    def __init__(self) -> None:
        super().__init__()
        self._tokens: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def add(self, token: str) -> None:
        with self._lock:
            self._tokens |= {token}

    def _clean(self, text: str) -> str:
        for token in self._tokens:
            text = redact(text, token)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record; keep only its template
            message = str(record.msg)
        record.msg, record.args = self._clean(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._clean(record.exc_text)
        if record.stack_info:
            record.stack_info = self._clean(record.stack_info)
        return True


_REDACTOR: Final = _TokenRedactingFilter()


def install_log_redaction(token: str) -> None:
    """Redact ``token`` from every record of the loggers that print request URLs.

    Filters on a logger see only records created by that very logger, so each
    URL-logging logger gets the (shared, idempotent) filter.
    """
    _REDACTOR.add(token)
    for name in _URL_LOGGERS:
        logger = logging.getLogger(name)
        if _REDACTOR not in logger.filters:
            logger.addFilter(_REDACTOR)


class _Secret:
    """Holds the token so that ``repr``/``vars`` of the client never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return REDACTED


# --------------------------------------------------------------------------- classification


def retry_after_seconds(value: object) -> int | float | None:
    """``retry_after`` in seconds from a number or a ``timedelta`` (PTB 22 may use either)."""
    if isinstance(value, dtm.timedelta):
        seconds = value.total_seconds()
        return int(seconds) if seconds.is_integer() else seconds
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _is_message(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("message_id"), int)
        and isinstance(value.get("chat"), dict)
        and isinstance(value["chat"].get("id"), int)
    )


def _is_update_list(value: object) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, dict) and isinstance(item.get("update_id"), int) for item in value
    )


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
    "getUpdates": _is_update_list,
    "sendMessage": _is_message,
    "editMessageReplyMarkup": _is_message_or_true,
    "answerCallbackQuery": _is_true,
    "deleteWebhook": _is_true,
}


def classify_response(method: str, status: int, payload: bytes) -> CallResult:
    """Classify an HTTP response from the Bot API (the token must already be gone)."""
    try:
        body = json.loads(payload)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return CallResult(
            method, Outcome.AMBIGUOUS, description=f"unreadable response (HTTP {status})"
        )
    if body.get("ok") is True:
        return _classify_success(method, status, body)
    if body.get("ok") is False:
        return _rejection(method, status, body)
    return CallResult(method, Outcome.AMBIGUOUS, description=f"response without ok (HTTP {status})")


def _classify_success(method: str, status: int, body: JSONDict) -> CallResult:
    expected = _EXPECTED.get(method, _is_anything)
    if 200 <= status < 300 and "result" in body and expected(body["result"]):
        return CallResult(method, Outcome.OK, result=body["result"])
    return CallResult(
        method,
        Outcome.AMBIGUOUS,
        description=f"ok response without the expected result (HTTP {status})",
    )


def _rejection(method: str, status: int, body: JSONDict) -> CallResult:
    code = body.get("error_code")
    description = body.get("description")
    raw_params = body.get("parameters")
    params: JSONDict = raw_params if isinstance(raw_params, dict) else {}
    migrate = params.get("migrate_to_chat_id")
    return CallResult(
        method,
        Outcome.REJECTED,
        error_code=_error_code(code, status),
        description=description if isinstance(description, str) else f"HTTP {status}",
        retry_after=retry_after_seconds(params.get("retry_after")),
        migrate_to_chat_id=migrate if isinstance(migrate, int) else None,
    )


def _error_code(code: object, status: int) -> int | None:
    """The body's error_code, else the HTTP status when it is an error status."""
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    return status if status >= 400 else None


def classify_exception(method: str, exc: BaseException) -> CallResult:
    """Classify a transport failure by the httpx error PTB wrapped (``__cause__``)."""
    cause = exc.__cause__ if isinstance(exc, TelegramError) and exc.__cause__ else exc
    if isinstance(cause, _NOT_SENT_ERRORS):
        return CallResult(method, Outcome.NOT_SENT, description=_describe(cause))
    if isinstance(cause, RuntimeError):
        # HTTPXRequest refuses before sending when its httpx client is closed.
        return CallResult(method, Outcome.NOT_SENT, description=_describe(cause))
    return CallResult(method, Outcome.AMBIGUOUS, description=_describe(cause))


def _describe(exc: BaseException) -> str:
    """``httpx.ReadTimeout`` or ``httpx.ConnectError: <message>``: class first, text if any."""
    module = "httpx." if isinstance(exc, httpx.HTTPError) else ""
    text = str(exc)
    return f"{module}{type(exc).__name__}: {text}" if text else f"{module}{type(exc).__name__}"


def _is_retryable(result: CallResult) -> bool:
    return result.outcome is Outcome.NOT_SENT or result.is_rate_limited


class _WaitRetryAfter(wait_base):
    """Wait what a 429 asks for; back off exponentially after a not-sent attempt."""

    def __init__(self, fallback: wait_base) -> None:
        self._fallback = fallback

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        result = outcome.result() if outcome is not None and not outcome.failed else None
        if isinstance(result, CallResult) and result.retry_after is not None:
            return float(result.retry_after)
        return self._fallback(retry_state)


class _StopAtDeadline(stop_base):
    """Stop when the next attempt would start after the caller's deadline."""

    def __init__(self, deadline: float | None, clock: Clock) -> None:
        self._deadline = deadline
        self._clock = clock

    def __call__(self, retry_state: RetryCallState) -> bool:
        if self._deadline is None:
            return False
        return self._clock() + retry_state.upcoming_sleep >= self._deadline


def _form_data(params: Mapping[str, object]) -> RequestData:
    """Form fields as the Bot API takes them: strings raw, nested values compact JSON.

    Raises ValueError for text that cannot be UTF-8 encoded (a lone surrogate):
    found here, before sending, it is a caller error, not an ambiguous call.
    """
    fields = {
        key: value if isinstance(value, str) else _compact(value)
        for key, value in params.items()
        if value is not None
    }
    for key, value in fields.items():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"parameter {key!r} is not valid Unicode text") from None
    # RequestParameter is PTB-internal, but it is how telegram.Bot builds every
    # request (PTB is pinned below 23); string values are sent unchanged.
    return RequestData(
        [RequestParameter(name=k, value=v, input_files=None) for k, v in fields.items()]
    )


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------- client


class TelegramClient:
    """Async Bot API client: Bot API method names, classified ``CallResult`` answers."""

    def __init__(
        self,
        token: str,
        *,
        api_base_url: str = DEFAULT_API_BASE_URL,
        connect_timeout: float = 5.0,
        read_timeout: float = 5.0,
        write_timeout: float = 5.0,
        pool_timeout: float = 1.0,
        max_attempts: int = 3,
        backoff: wait_base | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.time,
    ) -> None:
        if not _TOKEN_FORMAT.fullmatch(token or ""):
            raise InvalidTokenFormat(
                "the bot token must look like <bot id>:<letters, digits, '_' or '-'>"
            )
        self._api_base_url = _checked_base_url(api_base_url)
        self._secret = _Secret(token)
        self._timeouts = (connect_timeout, read_timeout, write_timeout, pool_timeout)
        self._max_attempts = max(1, max_attempts)
        self._backoff = backoff or wait_exponential(multiplier=0.5, max=8)
        self._sleep = sleep
        self._clock = clock
        self._closed = False
        install_log_redaction(token)
        # Separate pools as in telegram.Bot: one connection for getUpdates, so an
        # accidental second concurrent poll fails with a pool timeout (not sent).
        # Plain http (a local Bot API server, the fake) never uses TLS: skip building a
        # context, which costs ~50 ms at start-up.
        https = urlsplit(self._api_base_url).scheme == "https"
        shared_tls: dict[str, Any] = {"verify": _ssl_context() if https else False}
        self._request: BaseRequest = HTTPXRequest(
            connect_timeout=connect_timeout, read_timeout=read_timeout,
            write_timeout=write_timeout, pool_timeout=pool_timeout, httpx_kwargs=shared_tls,
        )  # fmt: skip
        self._updates_request: BaseRequest = HTTPXRequest(
            connection_pool_size=1, connect_timeout=connect_timeout, read_timeout=read_timeout,
            write_timeout=write_timeout, pool_timeout=pool_timeout, httpx_kwargs=shared_tls,
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"TelegramClient(api_base_url={self._api_base_url!r})"

    async def __aenter__(self) -> Self:
        await self.initialize()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        await self.shutdown()

    async def initialize(self) -> None:
        """Open the HTTP connection pools."""
        if self._closed:
            raise ClientClosedError("this Telegram client was shut down")
        await self._request.initialize()
        await self._updates_request.initialize()

    async def shutdown(self) -> None:
        """Close the HTTP connection pools; later calls raise ClientClosedError."""
        self._closed = True
        await self._request.shutdown()
        await self._updates_request.shutdown()

    @property
    def api_base_url(self) -> str:
        """The Bot API server, without the ``/bot<token>`` part."""
        return self._api_base_url

    # ---- Bot API methods

    async def get_me(self, *, deadline: float | None = None) -> CallResult:
        """``getMe``: the bot's User; checks the token."""
        return await self._call("getMe", {}, deadline)

    async def get_updates(
        self,
        offset: int | None,
        timeout: int = 0,
        limit: int = 100,
        allowed_updates: Sequence[str] | None = DEFAULT_ALLOWED_UPDATES,
        *,
        deadline: float | None = None,
    ) -> CallResult:
        """``getUpdates``: raw update dicts in ``result``/``updates``.

        The long poll is shortened so it ends by ``deadline``; the read timeout
        is the client's read timeout plus the poll time, as in telegram.Bot.
        """
        if deadline is not None:
            timeout = max(0, min(timeout, int(deadline - self._clock())))
        params: JSONDict = {
            "offset": offset,
            "limit": limit,
            "timeout": timeout,
            "allowed_updates": list(allowed_updates) if allowed_updates is not None else None,
        }
        return await self._call("getUpdates", params, deadline, extra_read=timeout)

    async def send_message(
        self,
        chat_id: int | str,
        text: str,
        reply_markup: Mapping[str, Any] | TelegramObject | None = None,
        message_thread_id: int | None = None,
        *,
        deadline: float | None = None,
    ) -> CallResult:
        """``sendMessage`` with plain text (no parse mode).

        ``reply_markup`` is a Bot API dict (``{"inline_keyboard": ...}``,
        ``{"force_reply": true}``) or the equivalent PTB object.
        """
        params: JSONDict = {
            "chat_id": chat_id,
            "text": text,
            "reply_markup": _markup_dict(reply_markup),
            "message_thread_id": message_thread_id,
        }
        return await self._call("sendMessage", params, deadline)

    async def edit_message_reply_markup(
        self, chat_id: int | str, message_id: int, *, deadline: float | None = None
    ) -> CallResult:
        """``editMessageReplyMarkup`` with an empty inline keyboard: removes the buttons."""
        params: JSONDict = {
            "chat_id": chat_id,
            "message_id": message_id,
            "reply_markup": {"inline_keyboard": []},
        }
        return await self._call("editMessageReplyMarkup", params, deadline)

    async def answer_callback_query(
        self, callback_query_id: str, text: str | None = None, *, deadline: float | None = None
    ) -> CallResult:
        """``answerCallbackQuery``: stops the client's spinner, optionally with a toast."""
        params: JSONDict = {"callback_query_id": callback_query_id, "text": text}
        return await self._call("answerCallbackQuery", params, deadline)

    async def delete_webhook(
        self, drop_pending_updates: bool | None = None, *, deadline: float | None = None
    ) -> CallResult:
        """``deleteWebhook``: required before getUpdates when a webhook was set."""
        params: JSONDict = {"drop_pending_updates": drop_pending_updates}
        return await self._call("deleteWebhook", params, deadline)

    # ---- plumbing

    async def _call(
        self, method: str, params: Mapping[str, object], deadline: float | None,
        extra_read: float = 0.0,
    ) -> CallResult:  # fmt: skip
        """One Bot API call with retries of not-sent attempts and 429s, up to the deadline."""
        if self._closed:
            raise ClientClosedError("this Telegram client was shut down")
        if deadline is not None and self._clock() >= deadline:
            return CallResult(method, Outcome.NOT_SENT, description="deadline passed", attempts=0)
        form = _form_data(params)
        attempts = 0

        async def attempt() -> CallResult:
            nonlocal attempts
            attempts += 1
            return await self._attempt(method, form, extra_read)

        retrying = AsyncRetrying(
            sleep=self._sleep,
            stop=stop_after_attempt(self._max_attempts) | _StopAtDeadline(deadline, self._clock),
            wait=_WaitRetryAfter(self._backoff),
            retry=retry_if_result(_is_retryable),
            retry_error_callback=_last_result,
        )
        result: CallResult = await retrying(attempt)
        _LOG.debug(
            "Bot API %s: %s after %d attempt(s) (error_code=%s)",
            method, result.outcome.value, attempts, result.error_code,
        )  # fmt: skip
        return replace(result, attempts=attempts)

    async def _attempt(self, method: str, form: RequestData, extra_read: float) -> CallResult:
        """Send once and classify; nothing raised here may carry the URL out."""
        request = self._updates_request if method == "getUpdates" else self._request
        connect, read, write, pool = self._timeouts
        token = self._secret.reveal()
        try:
            status, payload = await request.do_request(
                url=f"{self._api_base_url}/bot{token}/{method}",
                method="POST",
                request_data=form,
                read_timeout=read + extra_read,
                write_timeout=write,
                connect_timeout=connect,
                pool_timeout=pool,
            )
        except Exception as exc:  # classified; the exception (and its URL) stays here
            result = classify_exception(method, exc)
            return replace(result, description=redact(result.description or "", token))
        # The server could echo the URL in an error text; scrub before parsing.
        return classify_response(method, status, payload.replace(token.encode(), REDACTED.encode()))


def _last_result(retry_state: RetryCallState) -> CallResult:
    """When retries stop, hand back the last classified result instead of raising."""
    outcome = retry_state.outcome
    assert outcome is not None  # tenacity calls this only after an attempt
    result: CallResult = outcome.result()
    return result


def _markup_dict(markup: Mapping[str, Any] | TelegramObject | None) -> JSONDict | None:
    if markup is None:
        return None
    if isinstance(markup, TelegramObject):
        return markup.to_dict()
    return dict(markup)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying TLS context per process: building one costs ~50 ms, twice per client."""
    return httpx.create_ssl_context()


def _checked_base_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
        raise ValueError(f"api_base_url must be an http(s) URL without a query: {url!r}")
    return url.rstrip("/")
