"""`setup telegram`'s steps on the Bot API: verify the token (getMe), find a webhook
(getWebhookInfo), make the bot pollable (deleteWebhook, only when the operator agrees: never
silently) and offer the bot's commands in the chat's menu (setMyCommands: `commands.MENU`).
The calls go through python-telegram-bot's `Bot` (`adapters.telegram.setup_bot`); this module
turns their outcomes into the operator's lines and exit codes. Nothing here writes a file.
"""

from __future__ import annotations

import asyncio
import re
import sys
from dataclasses import dataclass, replace
from typing import ClassVar, Final
from urllib.parse import urlsplit

from adapters.telegram.errors import InvalidTokenFormat
from adapters.telegram.redaction import redact
from adapters.telegram.results import CallOutcome, CallResult
from adapters.telegram.setup_bot import SetupBot, SetupCallFailed
from channels.config.errors import ConfigInvalid
from channels.errors import ChannelsError
from channels.telegram.commands import MENU
from state.exit_codes import ExitCode

__all__ = [
    "BotApiUnavailable", "VerifiedBot", "WebhookBlocksPolling", "prepare_polling",
    "print_notes", "verify_token",
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


class BotApiUnavailable(ChannelsError):
    """getMe could not confirm or refuse the token (unreachable, no response); exit 75."""

    code: ClassVar[str] = "telegram_setup_unavailable"
    exit_code: ClassVar[int] = ExitCode.TEMPORARY


class WebhookBlocksPolling(ChannelsError):
    """The bot has a webhook, which the operator did not agree to delete; exit 75, as the
    409 that `poll` would get (README's table: a provider conflict)."""

    code: ClassVar[str] = "telegram_setup_webhook"
    exit_code: ClassVar[int] = ExitCode.TEMPORARY


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


def prepare_polling(
    token: str, api_base_url: str, bot: VerifiedBot, *, delete_webhook: bool,
    deadline_seconds: float = _VERIFY_DEADLINE_SECONDS,
) -> VerifiedBot:  # fmt: skip
    """Make the verified bot pollable: delete its webhook if it has one and the operator
    agrees (`--delete-webhook`, or yes at the prompt; otherwise exit 75, nothing written),
    then set its command menu so that the bot's commands are offered in the chat."""
    deleting = bool(bot.webhook) and _webhook_may_go(bot.webhook or "", token, delete_webhook)
    client = _setup_bot(token, api_base_url)
    try:
        commands_set = asyncio.run(_ready(client, deleting, deadline_seconds))
    except TimeoutError:
        what = "deleteWebhook" if deleting else "setMyCommands"
        raise BotApiUnavailable(
            f"Telegram {what} at {api_base_url} did not return a response within "
            f"{deadline_seconds:g} s; {_NOTHING_WRITTEN}"
        ) from None
    except SetupCallFailed as failed:  # only deleteWebhook's failure stops setup
        detail = failed.result.description or "no detail"
        raise BotApiUnavailable(
            f"Telegram deleteWebhook failed ({detail}); the webhook is still set;"
            f" {_NOTHING_WRITTEN}") from None
    return replace(bot, commands_set=commands_set, webhook_deleted=deleting)


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


def _webhook_may_go(webhook: str, token: str, delete_webhook: bool) -> bool:
    """Whether the operator agrees to delete the webhook: `--delete-webhook`, or yes at the
    prompt on a terminal; raise WebhookBlocksPolling otherwise (never deleted silently)."""
    where = _webhook_place(webhook, token)
    if delete_webhook:
        return True
    if sys.stdin is not None and sys.stdin.isatty():
        print(f"This bot has a webhook ({where}): Telegram sends it every update, and refuses"
              " to be polled while it is set. Delete the webhook so that piw-channels can poll"
              " (the updates waiting are kept)? [y/N] ", end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() in ("y", "yes"):
            return True
    raise WebhookBlocksPolling(
        f"Telegram setup: this bot has a webhook ({where}), and Telegram refuses to be polled"
        " while it is set: run setup again with --delete-webhook to delete it (the updates"
        f" waiting are kept); {_NOTHING_WRITTEN}")


def _webhook_place(webhook: str, token: str) -> str:
    """Where the webhook points, as scheme and host only: its path may hold a secret (a bot's
    token, even) and is never printed."""
    try:
        parts = urlsplit(redact(webhook, token))
        host = parts.hostname
    except ValueError:
        host = None
    if not host or not _HOST.fullmatch(host):
        return "at a URL that is not shown"
    return f"at {parts.scheme}://{host}/..."


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


def print_notes(bot: VerifiedBot) -> None:
    """What the operator should know although the profile works (stderr, after the summary)."""
    if bot.webhook_deleted:
        print(f"Deleted the bot's webhook ({_webhook_place(bot.webhook or '', '')}): it is"
              " polled now.", file=sys.stderr)
    if bot.webhook is None:
        print("Note: whether the bot has a webhook could not be checked (getWebhookInfo"
              " failed); `poll` says so if one is set.", file=sys.stderr)
    if not bot.commands_set:  # the profile works; only the chat's command menu is missing
        print("Note: the bot's command menu (/pending, /mute) could not be set; run setup"
              " again to retry. Typing the commands works without it.", file=sys.stderr)
