"""TelegramClient: Bot API method names in, classified ``CallResult`` answers out.

Every call returns a ``CallResult`` (see ``results``) instead of raising.
Not-sent attempts and 429s are retried here, up to the caller's deadline;
ambiguous ones never are.

This is the cron path's client (`poll`, `resend`, `--find-chat`'s wait). The transport is
``http.HttpPool``: what python-telegram-bot's ``HTTPXRequest.do_request`` did (pool limits,
timeouts, form encoding), without importing the ``telegram`` package (a third of a cron
poll's start-up); the raw status and body are classified here. ``telegram.Bot``'s methods
are not used on this path: its ``repr`` and its debug log contain the token, its ``post``
keeps only ``result`` (``ok: false`` with HTTP 200 becomes a ``KeyError``, exact
descriptions and error codes are rewritten), and reading ``RetryAfter.retry_after`` emits a
deprecation warning in v22. `setup`, run by hand, uses it (``setup_bot``).

The bot token travels only inside request URLs. It never appears in results,
exceptions or ``repr`` (see ``redaction``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, Final, Self
from urllib.parse import urlsplit

import httpx

from adapters.telegram.errors import ClientClosedError, InvalidTokenFormat
from adapters.telegram.http import Files, HttpPool
from adapters.telegram.redaction import (
    Secret,
    install_log_redaction,
    redact,
    redact_bytes,
)
from adapters.telegram.results import (
    CallOutcome,
    CallResult,
    JSONDict,
    classify_exception,
    classify_response,
)
from channels.config.files import BOT_TOKEN_FORMAT
from channels.config.model import DEFAULT_API_BASE_URL

__all__ = ["DEFAULT_ALLOWED_UPDATES", "TelegramClient", "prepare_tls_context"]


_Sleep = Callable[[float], Awaitable[None]]
_Clock = Callable[[], float]

# my_chat_member: the bot learns at once that it was removed from (or blocked in) a chat.
DEFAULT_ALLOWED_UPDATES: Final = ("message", "callback_query", "my_chat_member")
# A real token is "<bot id>:<35 URL-safe characters>"; anything else could
# change the request path, so it is refused rather than encoded (the config
# refuses such a token file first, naming it).
_TOKEN_FORMAT: Final = BOT_TOKEN_FORMAT

_LOG = logging.getLogger(__name__)


# --------------------------------------------------------------------------- retries


def _is_retryable(result: CallResult, rate_limited: bool = True) -> bool:
    return result.outcome is CallOutcome.NOT_SENT or (rate_limited and result.is_rate_limited)


def _exponential_backoff(attempt: int) -> float:
    """Seconds before the next try after `attempt` not-sent tries: 0.5, 1, 2, 4, then 8."""
    return min(8.0, 0.5 * 2.0 ** (attempt - 1))


# --------------------------------------------------------------------------- form data


def _form_data(params: Mapping[str, object]) -> dict[str, str]:
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
    return fields


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
        retry_rate_limited: bool = True,
        backoff: Callable[[int], float] = _exponential_backoff,
        sleep: _Sleep = asyncio.sleep,
        clock: _Clock = time.time,
    ) -> None:
        if not _TOKEN_FORMAT.fullmatch(token or ""):
            raise InvalidTokenFormat(
                "the bot token must look like <bot id>:<letters, digits, '_' or '-'>"
            )
        self._api_base_url = _checked_base_url(api_base_url)
        self._secret = Secret(token)
        self._timeouts = (connect_timeout, read_timeout, write_timeout, pool_timeout)
        self._max_attempts = max(1, max_attempts)
        # False: a 429 is returned at once (the poll cycle's pacer holds the chat or the bot
        # for every call, not just this one).
        self._retry_rate_limited = retry_rate_limited
        self._backoff = backoff
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
        self._request = HttpPool(
            connect_timeout=connect_timeout, read_timeout=read_timeout,
            write_timeout=write_timeout, pool_timeout=pool_timeout, httpx_kwargs=shared_tls,
        )  # fmt: skip
        self._updates_request = HttpPool(
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
        reply_markup: Mapping[str, Any] | None = None,
        message_thread_id: int | None = None,
        *,
        entities: Sequence[Mapping[str, Any]] | None = None,
        disable_notification: bool = False,
        reply_to: int | None = None,
        deadline: float | None = None,
    ) -> CallResult:
        """``sendMessage`` with plain text (no parse mode).

        ``reply_markup`` is a Bot API dict (``{"inline_keyboard": ...}``,
        ``{"force_reply": true}``); ``entities`` are
        MessageEntity dicts (bold, code, a ``text_mention``, ...). ``reply_to`` threads the
        message under another of the chat; it is still sent if that one was deleted.
        """
        params: JSONDict = {
            "chat_id": chat_id,
            "text": text,
            "entities": [dict(e) for e in entities] if entities else None,
            "reply_markup": None if reply_markup is None else dict(reply_markup),
            "message_thread_id": message_thread_id,
            "disable_notification": True if disable_notification else None,
            "reply_parameters": None if reply_to is None else
            {"message_id": reply_to, "allow_sending_without_reply": True},
        }
        return await self._call("sendMessage", params, deadline)

    async def send_document(
        self, chat_id: int | str, file_name: str, data: bytes, *, caption: str | None = None,
        disable_notification: bool = False, deadline: float | None = None,
    ) -> CallResult:
        """``sendDocument``: ``data`` uploaded as ``file_name`` (multipart/form-data,
        ``text/plain; charset=utf-8``), with a plain caption (no parse mode)."""
        params: JSONDict = {
            "chat_id": chat_id,
            "caption": caption,
            "disable_notification": True if disable_notification else None,
        }
        files = {"document": (file_name, data, "text/plain; charset=utf-8")}
        return await self._call("sendDocument", params, deadline, files=files)

    async def edit_message_reply_markup(
        self, chat_id: int | str, message_id: int, *,
        reply_markup: Mapping[str, Any] | None = None, deadline: float | None = None,
    ) -> CallResult:
        """``editMessageReplyMarkup``: the message's keyboard becomes ``reply_markup`` (an
        ``{"inline_keyboard": ...}`` dict); without one, an empty keyboard removes the
        buttons."""
        params: JSONDict = {
            "chat_id": chat_id,
            "message_id": message_id,
            "reply_markup": {"inline_keyboard": []} if reply_markup is None
            else dict(reply_markup),
        }
        return await self._call("editMessageReplyMarkup", params, deadline)

    async def set_message_reaction(
        self, chat_id: int | str, message_id: int, emoji: str, *,
        deadline: float | None = None,
    ) -> CallResult:
        """``setMessageReaction`` with one emoji reaction (a bot sets at most one)."""
        params: JSONDict = {
            "chat_id": chat_id,
            "message_id": message_id,
            "reaction": [{"type": "emoji", "emoji": emoji}],
        }
        return await self._call("setMessageReaction", params, deadline)

    async def edit_message_text(
        self, chat_id: int | str, message_id: int, text: str, *,
        entities: Sequence[Mapping[str, Any]] | None = None, deadline: float | None = None,
    ) -> CallResult:
        """``editMessageText`` with plain text and entities (no parse mode, no keyboard)."""
        params: JSONDict = {
            "chat_id": chat_id,
            "message_id": message_id,
            "text": text,
            "entities": [dict(e) for e in entities] if entities else None,
        }
        return await self._call("editMessageText", params, deadline)

    async def answer_callback_query(
        self, callback_query_id: str, text: str | None = None, *, deadline: float | None = None
    ) -> CallResult:
        """``answerCallbackQuery``: stops the client's spinner, optionally with a toast."""
        params: JSONDict = {"callback_query_id": callback_query_id, "text": text}
        return await self._call("answerCallbackQuery", params, deadline)

    # ---- plumbing

    async def _call(
        self, method: str, params: Mapping[str, object], deadline: float | None,
        extra_read: float = 0.0, files: Files | None = None,
    ) -> CallResult:  # fmt: skip
        """One Bot API call with retries of not-sent attempts and 429s, up to the deadline."""
        if self._closed:
            raise ClientClosedError("this Telegram client was shut down")
        if deadline is not None and self._clock() >= deadline:
            return CallResult(
                method, CallOutcome.NOT_SENT, description="deadline passed", attempts=0
            )
        form = _form_data(params)
        attempts = 0
        while True:
            attempts += 1
            result = await self._attempt(method, form, extra_read, files)
            if not _is_retryable(result, self._retry_rate_limited) or \
                    attempts >= self._max_attempts:
                break
            # Wait what a 429 asks for, else back off; never start a try after the deadline.
            wait = float(result.retry_after) if result.retry_after is not None else \
                self._backoff(attempts)
            if deadline is not None and self._clock() + wait >= deadline:
                break
            await self._sleep(wait)
        _LOG.debug(
            "Bot API %s: %s after %d attempt(s) (error_code=%s)",
            method, result.outcome.value, attempts, result.error_code,
        )  # fmt: skip
        return replace(result, attempts=attempts)

    async def _attempt(self, method: str, form: dict[str, str], extra_read: float,
                       files: Files | None = None) -> CallResult:
        """Send once and classify; nothing raised here may carry the URL out."""
        request = self._updates_request if method == "getUpdates" else self._request
        connect, read, write, pool = self._timeouts
        # An upload may take longer to write: a second more per 100 kB (over a slow link).
        write += sum(len(data) for _, data, _ in (files or {}).values()) / 100_000
        token = self._secret.reveal()
        try:
            status, payload = await request.do_request(
                url=f"{self._api_base_url}/bot{token}/{method}",
                method="POST",
                fields=form,
                read_timeout=read + extra_read,
                write_timeout=write,
                connect_timeout=connect,
                pool_timeout=pool,
                files=files,
            )
        except Exception as exc:  # classified; the exception (and its URL) stays here
            result = classify_exception(method, exc)
            return replace(result, description=redact(result.description or "", token))
        # The server could echo the URL (or only the secret, or JSON-escaped) in an error
        # text: scrub the bytes, then every decoded string, before anything keeps them.
        return classify_response(method, status, redact_bytes(payload, token),
                                 lambda text: redact(text, token))


class _TlsContext:
    """The process's one verifying TLS context: building one costs ~50 ms, twice per client.

    Most of that is OpenSSL parsing the CA bundle, which it does without holding the GIL, so it
    is built in a thread: started by `prepare_tls_context` before a cron pass opens its
    database (or by the first client), it overlaps the pass's first transactions and the
    import of httpcore, which the pools need next (issue 27: start-up is most of a cron pass)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._built: list[ssl.SSLContext] = []
        self._failed: list[BaseException] = []

    def start(self) -> None:
        with self._lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._build, name="piw-tls-context",
                                                daemon=True)
                self._worker.start()

    def _build(self) -> None:
        try:
            self._built.append(httpx.create_ssl_context())
        except BaseException as exc:  # raised in the caller's thread, by `get`
            self._failed.append(exc)

    def get(self) -> ssl.SSLContext:
        self.start()
        import httpcore  # noqa: F401  (httpx's transport imports it when the first pool is built)

        with self._lock:
            assert self._worker is not None
            self._worker.join()
            if self._failed:  # not kept: the next client tries again, as it always did
                self._worker = None
                raise self._failed.pop()
            return self._built[0]


_TLS = _TlsContext()


def prepare_tls_context() -> None:
    """Start building the verifying TLS context now, for the clients made later."""
    _TLS.start()


def _ssl_context() -> ssl.SSLContext:
    return _TLS.get()


def _checked_base_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
        raise ValueError(f"api_base_url must be an http(s) URL without a query: {url!r}")
    return url.rstrip("/")
