"""`setup telegram`'s steps on the Bot API: verify the token (getMe, then getWebhookInfo), make
the bot pollable (deleteWebhook when the operator agreed, then setMyCommands: `commands.MENU`),
and wait for a message to find the chat it came from (getUpdates, never confirming one).

getMe and the webhook calls go through python-telegram-bot's `Bot` (setup_bot); getUpdates
through the cron path's own client. Each outcome that stops setup is one error with its exit
code (the operator's line); whether to delete a webhook is the caller's to ask. Nothing here
writes a file.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from adapters.telegram.client import DEFAULT_ALLOWED_UPDATES, TelegramClient
from adapters.telegram.errors import InvalidTokenFormat
from adapters.telegram.redaction import redact
from adapters.telegram.results import CallOutcome, CallResult
from adapters.telegram.setup_bot import SetupBot, SetupCallFailed
from channels.config.errors import ConfigInvalid
from channels.errors import ChannelsError
from channels.telegram.commands import MENU
from state.exit_codes import ExitCode

__all__ = [
    "BotApiUnavailable", "FindChatUnavailable", "VerifiedBot", "find_chats", "make_pollable",
    "verify_token",
]


_VERIFY_DEADLINE_SECONDS: Final = 10.0
# Per-phase HTTP timeouts, all inside the total deadline above.
_CONNECT_TIMEOUT: Final = 5.0
_IO_TIMEOUT: Final = 5.0
_POOL_TIMEOUT: Final = 1.0
_REJECTED_TOKEN_CODES: Final = frozenset({401, 404})  # what the Bot API answers a bad token

# Telegram usernames are 5-32 of these; anything else from the server is not printed.
_USERNAME: Final = re.compile(r"[A-Za-z0-9_]{1,64}")
# A webhook's host as printed (a DNS name or an address; anything else is not printed).
_HOST: Final = re.compile(r"[A-Za-z0-9.:_-]{1,253}")
_NOTHING_WRITTEN: Final = "nothing was written"

_LONG_POLL_SECONDS: Final = 20
_QUEUED_RECHECK_SECONDS: Final = 1.0
_MESSAGES: Final = ("message", "edited_message", "channel_post", "my_chat_member")


class BotApiUnavailable(ChannelsError):
    """getMe could not confirm or refuse the token (unreachable, no response); exit 75."""

    code: ClassVar[str] = "telegram_setup_unavailable"
    exit_code: ClassVar[int] = ExitCode.TEMPORARY


class FindChatUnavailable(ChannelsError):
    """getUpdates could not wait for a message (another poller, a failing Bot API); 75."""

    code = "telegram_find_chat_unavailable"
    exit_code = ExitCode.TEMPORARY


@dataclass(frozen=True, slots=True)
class VerifiedBot:
    """The bot that getMe returned: enough to tell the operator which bot was verified."""

    id: int
    username: str | None
    commands_set: bool = True  # the command menu was registered (setMyCommands)
    webhook: str | None = ""  # getWebhookInfo's url ("": none; None: it could not be checked)
    webhook_deleted: bool = False

    @property
    def label(self) -> str:
        """`@username`, or `id <n>` for a bot without a printable username."""
        return f"@{self.username}" if self.username else f"id {self.id}"

    def webhook_place(self, token: str = "") -> str:
        """Where the webhook points, as scheme and host only: its path may hold a secret (a
        bot's token, even) and is never printed."""
        try:
            parts = urlsplit(redact(self.webhook or "", token))
            host = parts.hostname
        except ValueError:
            host = None
        if not host or not _HOST.fullmatch(host):
            return "at a URL that is not shown"
        return f"at {parts.scheme}://{host}/..."


def verify_token(
    token: str, api_base_url: str, *, deadline_seconds: float = _VERIFY_DEADLINE_SECONDS
) -> VerifiedBot:
    """getMe (one retry if not sent), then whether a webhook is set (getWebhookInfo), within
    the deadline; raise unless getMe succeeded."""
    bot = _setup_bot(token, api_base_url)
    try:
        return asyncio.run(_check(bot, deadline_seconds))
    except TimeoutError:
        raise BotApiUnavailable(
            f"Telegram getMe at {api_base_url} did not return a response within "
            f"{deadline_seconds:g} s; {_NOTHING_WRITTEN}"
        ) from None
    except SetupCallFailed as failed:
        raise _refusal(failed.result, api_base_url) from None


def make_pollable(
    token: str, api_base_url: str, bot: VerifiedBot, *, delete_webhook: bool,
    deadline_seconds: float = _VERIFY_DEADLINE_SECONDS,
) -> VerifiedBot:  # fmt: skip
    """Delete the verified bot's webhook when `delete_webhook` (the operator agreed), then set
    its command menu so that the bot's commands are offered in the chat."""
    client = _setup_bot(token, api_base_url)
    try:
        commands_set = asyncio.run(_ready(client, delete_webhook, deadline_seconds))
    except TimeoutError:
        what = "deleteWebhook" if delete_webhook else "setMyCommands"
        raise BotApiUnavailable(
            f"Telegram {what} at {api_base_url} did not return a response within "
            f"{deadline_seconds:g} s; {_NOTHING_WRITTEN}"
        ) from None
    except SetupCallFailed as failed:  # only deleteWebhook's failure stops setup
        detail = failed.result.description or "no detail"
        raise BotApiUnavailable(
            f"Telegram deleteWebhook failed ({detail}); the webhook is still set;"
            f" {_NOTHING_WRITTEN}") from None
    return replace(bot, commands_set=commands_set, webhook_deleted=delete_webhook)


def _setup_bot(token: str, api_base_url: str) -> SetupBot:
    try:
        return SetupBot(token, api_base_url, connect_timeout=_CONNECT_TIMEOUT,
                        io_timeout=_IO_TIMEOUT, pool_timeout=_POOL_TIMEOUT)
    except InvalidTokenFormat as exc:
        # The message describes the expected shape; it never holds the token itself.
        raise ConfigInvalid(f"Telegram setup: token file: {exc}; {_NOTHING_WRITTEN}") from None


async def _check(bot: SetupBot, deadline_seconds: float) -> VerifiedBot:
    """getMe, then (once the token works) the webhook, if one is set."""
    async with bot, asyncio.timeout(deadline_seconds):
        bot_id, username = await bot.get_me()
        try:
            webhook: str | None = await bot.webhook_url()
        except SetupCallFailed:
            webhook = None  # unknown: said in a note; `poll` reports a webhook if one is set
    plain = isinstance(username, str) and _USERNAME.fullmatch(username) is not None
    return VerifiedBot(bot_id, username if plain else None, webhook=webhook)


async def _ready(bot: SetupBot, delete_webhook: bool, deadline_seconds: float) -> bool:
    """deleteWebhook when agreed, then the command menu; whether the menu was set."""
    async with bot, asyncio.timeout(deadline_seconds):
        if delete_webhook:
            await bot.delete_webhook()
        try:
            await bot.set_commands(MENU)
        except SetupCallFailed:
            return False
    return True


def _refusal(result: CallResult, api_base_url: str) -> ChannelsError:
    """The error for getMe's unsuccessful outcome."""
    if result.outcome is CallOutcome.REJECTED and result.error_code in _REJECTED_TOKEN_CODES:
        # The reference's wording; the description ("Unauthorized") adds nothing to it.
        return ConfigInvalid(
            f"Telegram setup: the Bot API rejected the token (HTTP {result.error_code}); "
            f"check the --token-file; {_NOTHING_WRITTEN}"
        )
    detail = result.description or "no detail"
    if result.outcome is CallOutcome.REJECTED:
        return BotApiUnavailable(
            f"Telegram getMe failed with HTTP {result.error_code} ({detail}); {_NOTHING_WRITTEN}"
        )
    if result.outcome is CallOutcome.NOT_SENT:
        return BotApiUnavailable(
            f"could not reach the Telegram Bot API at {api_base_url} ({detail}); {_NOTHING_WRITTEN}"
        )
    return BotApiUnavailable(
        f"Telegram getMe at {api_base_url} did not return a response that confirms the token "
        f"({detail}); {_NOTHING_WRITTEN}"
    )


# --- finding the chat ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Found:
    """One chat a message came from, and who sent it."""

    chat_id: int
    chat_type: str
    chat_name: str
    user_id: int | None
    user_name: str


def find_chats(token: str, api_base_url: str, seconds: float) -> list[_Found]:
    """Every distinct (chat, sender) of the first messages to reach the bot within `seconds`,
    oldest first; none when nothing came. It never confirms an update (it never sends an
    offset): whatever it sees stays queued for the poller. Waiting is a long poll while nothing
    is queued; while only other updates are queued it asks again once a second."""
    client = TelegramClient(token, api_base_url=api_base_url, retry_rate_limited=False)
    return asyncio.run(_wait(client, seconds))


def _name(who: dict[str, Any]) -> str:
    """What Telegram shows for a user or chat: its title, or first and last name."""
    title = who.get("title")
    if isinstance(title, str):
        return title
    parts = [who.get("first_name"), who.get("last_name")]
    return " ".join(p for p in parts if isinstance(p, str)) or "?"


def _chats_in(updates: list[Any]) -> list[_Found]:
    """Every distinct (chat, sender) of the message-like updates, oldest first."""
    found: dict[tuple[int, int | None], _Found] = {}
    for update in updates:
        if not isinstance(update, dict):
            continue
        item = next((update[k] for k in _MESSAGES if isinstance(update.get(k), dict)), None)
        chat = item.get("chat") if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(chat, dict) \
                or not isinstance(chat.get("id"), int):
            continue
        given = item.get("from")
        sender: dict[str, Any] = given if isinstance(given, dict) else {}
        user_id = sender.get("id") if isinstance(sender.get("id"), int) else None
        key = (int(chat["id"]), user_id)
        found.setdefault(key, _Found(int(chat["id"]), str(chat.get("type", "?")), _name(chat),
                                    user_id, _name(sender) if sender else "?"))
    return list(found.values())


async def _wait(client: TelegramClient, seconds: float) -> list[_Found]:
    end = time.monotonic() + seconds
    async with client:
        while (left := end - time.monotonic()) > 0:
            result: CallResult = await client.get_updates(
                None, timeout=min(_LONG_POLL_SECONDS, int(left)),
                allowed_updates=DEFAULT_ALLOWED_UPDATES)
            if result.is_conflict:
                raise FindChatUnavailable(
                    "another poller is using this bot (its piw-channels cron job, or a webhook):"
                    " stop it (comment out the cron line) while --find-chat waits")
            if not result.ok:
                raise FindChatUnavailable(f"getUpdates failed: {result.description or 'no detail'}")
            updates = result.result if isinstance(result.result, list) else []
            if found := _chats_in(updates):
                return found
            if updates:  # only other updates are queued: they stay for the poller
                await asyncio.sleep(_QUEUED_RECHECK_SECONDS)
    return []
