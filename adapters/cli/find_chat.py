"""`setup telegram --find-chat`: wait for a message to the bot and print the chat and user ids
it came from, so that nobody opens `getUpdates` in a browser with the token in the URL.

It never confirms an update (it never sends an offset): whatever it sees stays queued for the
poller, which would otherwise lose a button press made meanwhile. Waiting is a long poll while
nothing is queued; while only other updates are queued it asks again once a second.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from adapters.telegram.client import DEFAULT_ALLOWED_UPDATES, TelegramClient
from adapters.telegram.results import CallResult
from channels.config.model import DEFAULT_API_BASE_URL
from channels.errors import ChannelsError
from state.exit_codes import ExitCode

__all__ = ["FindChatUnavailable", "find_chat"]


_LONG_POLL_SECONDS: Final = 20
_QUEUED_RECHECK_SECONDS: Final = 1.0
_MESSAGES: Final = ("message", "edited_message", "channel_post", "my_chat_member")


class FindChatUnavailable(ChannelsError):
    """getUpdates could not wait for a message (another poller, a failing Bot API); 75."""

    code = "telegram_find_chat_unavailable"
    exit_code = ExitCode.TEMPORARY


@dataclass(frozen=True, slots=True)
class _Found:
    """One chat a message came from, and who sent it."""

    chat_id: int
    chat_type: str
    chat_name: str
    user_id: int | None
    user_name: str


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


def find_chat(token: str, bot: str, token_file: Path, api_base_url: str, seconds: float,
              as_json: bool) -> int:
    """Wait up to `seconds` for a message to `bot` (its label, verified by the caller with
    getMe); print where it came from."""
    print(f"Waiting up to {seconds:g} s for a message to {bot}: send it one from the chat"
          " to set up (in a group, mention it: @bot hello). Ctrl-C stops.", file=sys.stderr,
          flush=True)
    client = TelegramClient(token, api_base_url=api_base_url, retry_rate_limited=False)
    found = asyncio.run(_wait(client, seconds))
    if not found:
        print(f"Error: no message reached {bot} within {seconds:g} s; send it one (a"
              " private chat needs Start first), then run this again", file=sys.stderr)
        return ExitCode.TEMPORARY
    if as_json:
        print(json.dumps({"bot": bot, "chats": [asdict(f) for f in found]}, indent=2,
                         sort_keys=True, ensure_ascii=False))
        return ExitCode.OK
    for f in found:
        sender = "" if f.user_id is None else f", from user {f.user_id} ({f.user_name})"
        print(f"Chat {f.chat_id} ({f.chat_type}: {f.chat_name}){sender}")
        user = "ID" if f.user_id is None else str(f.user_id)
        api = "" if api_base_url == DEFAULT_API_BASE_URL else f" --api-base-url {api_base_url}"
        print(f"  piw-channels setup telegram --token-file {token_file} --user {user}"
              f" --chat {f.chat_id}{api}")
    return ExitCode.OK
