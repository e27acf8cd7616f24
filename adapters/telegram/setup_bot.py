"""`setup telegram`'s Bot API calls, through python-telegram-bot's `Bot`.

Setup runs by hand, once, so PTB's import cost (its package init loads every Bot API class)
does not matter there; the cron path (`poll`) never imports this module and stays on
``client`` over httpx (README, "Set up Telegram").

PTB raises where the cron client classifies, and its errors do not carry the HTTP status; so
the request below remembers each response (status, and body with the token scrubbed), and a
failed call is classified by the cron path's own rules (``results``): from what the server
answered, or from the httpx error PTB wraps when nothing came back.

The token never leaves: `Bot`'s own ``repr`` shows it (replaced here), `Bot.initialize`
names it in its `InvalidToken` (never called here), its debug log prints the request URL
(``redaction.install_log_redaction`` covers its logger), and no PTB exception escapes this
module.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, Final, Self, TypeVar

from telegram import Bot, BotCommand
from telegram.error import TelegramError
from telegram.request import HTTPXRequest

from adapters.telegram.errors import InvalidTokenFormat
from adapters.telegram.redaction import (
    REDACTED,
    Secret,
    install_log_redaction,
    redact,
    redact_bytes,
)
from adapters.telegram.results import (
    CallOutcome,
    CallResult,
    classify_exception,
    classify_response,
)
from channels.config.files import BOT_TOKEN_FORMAT

__all__ = ["SetupBot", "SetupCallFailed"]


_T = TypeVar("_T")

# One retry of a request that provably never left (a refused connection), after this pause:
# a blip should not fail setup, but an operator at a prompt should not wait long.
_RETRY_PAUSE: Final = 0.5
_MAX_ATTEMPTS: Final = 2
# What PTB raises on a response it cannot read (`result` missing, a User without an id).
_UNREADABLE: Final = (TelegramError, KeyError, TypeError, ValueError)


class SetupCallFailed(Exception):
    """A Bot API call of setup did not succeed; `result` says how (token-free)."""

    def __init__(self, result: CallResult) -> None:
        super().__init__(f"{result.method}: {result.outcome.value}")
        self.result = result


class _RememberingRequest(HTTPXRequest):
    """PTB's httpx request that remembers the last response, its body scrubbed of the token."""

    def __init__(self, token: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._secret = Secret(token)
        self.last: tuple[int, bytes] | None = None

    async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        self.last = None
        status, payload = await super().do_request(*args, **kwargs)
        payload = redact_bytes(payload, self._secret.reveal())
        self.last = (status, payload)
        return status, payload


class _Bot(Bot):
    """`Bot` whose ``repr`` does not show the token (PTB's is ``Bot[token=...]``)."""

    def __repr__(self) -> str:
        return f"Bot[token={REDACTED}]"


class SetupBot:
    """The calls setup makes, each classified; use as ``async with SetupBot(...) as bot:``."""

    def __init__(
        self, token: str, api_base_url: str, *, connect_timeout: float, io_timeout: float,
        pool_timeout: float, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:  # fmt: skip
        if not BOT_TOKEN_FORMAT.fullmatch(token or ""):
            raise InvalidTokenFormat(
                "the bot token must look like <bot id>:<letters, digits, '_' or '-'>")
        install_log_redaction(token)  # before `Bot` logs its URL, token included
        self._secret = Secret(token)
        timeouts: dict[str, Any] = {
            "connect_timeout": connect_timeout, "read_timeout": io_timeout,
            "write_timeout": io_timeout, "pool_timeout": pool_timeout,
        }  # fmt: skip
        self._request = _RememberingRequest(token, connection_pool_size=1, **timeouts)
        self._updates_request = HTTPXRequest(connection_pool_size=1, **timeouts)  # unused
        self._bot = _Bot(token, base_url=f"{api_base_url.rstrip('/')}/bot",
                         request=self._request, get_updates_request=self._updates_request)
        self._sleep = sleep

    def __repr__(self) -> str:
        return "SetupBot()"

    async def __aenter__(self) -> Self:
        await self._request.initialize()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        await self._request.shutdown()
        await self._updates_request.shutdown()

    async def get_me(self) -> tuple[int, str | None]:
        """The bot's id and username (getMe): the token works."""
        user = await self._call("getMe", self._bot.get_me)
        return user.id, user.username

    async def webhook_url(self) -> str:
        """The bot's webhook ("" when none is set): while one is set, polling is refused."""
        info = await self._call("getWebhookInfo", self._bot.get_webhook_info)
        return info.url or ""

    async def delete_webhook(self) -> None:
        """Remove the webhook; the updates waiting are kept for the poller."""
        await self._call("deleteWebhook",
                         lambda: self._bot.delete_webhook(drop_pending_updates=False))

    async def set_commands(self, commands: Sequence[tuple[str, str]]) -> None:
        """The bot's command menu ((command, description) pairs)."""
        menu = [BotCommand(name, description) for name, description in commands]
        await self._call("setMyCommands", lambda: self._bot.set_my_commands(menu))

    async def _call(self, method: str, call: Callable[[], Awaitable[_T]]) -> _T:
        """One call, tried once more if it provably never left; raise unless it succeeded."""
        for attempt in range(1, _MAX_ATTEMPTS + 1):
            started = time.monotonic()
            self._request.last = None  # what this attempt's response is, if any comes
            try:
                return await call()
            except _UNREADABLE as exc:
                result = replace(self._classify(method, exc), attempts=attempt)
            if result.outcome is not CallOutcome.NOT_SENT or attempt == _MAX_ATTEMPTS:
                break
            await self._sleep(max(0.0, _RETRY_PAUSE - (time.monotonic() - started)))
        raise SetupCallFailed(result) from None

    def _classify(self, method: str, exc: BaseException) -> CallResult:
        token = self._secret.reveal()
        if self._request.last is not None:
            status, payload = self._request.last
            result = classify_response(method, status, payload, lambda t: redact(t, token))
            if result.ok:  # the Bot API said ok, but PTB could not read its result
                return CallResult(method, CallOutcome.AMBIGUOUS, malformed=True,
                                  description=f"unreadable result (HTTP {status})")
            return result
        # Nothing came back: PTB's NetworkError and TimedOut wrap the httpx error.
        result = classify_exception(method, exc.__cause__ or exc)
        return replace(result, description=redact(result.description or "", token))
