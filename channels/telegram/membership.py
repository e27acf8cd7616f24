"""Chat changes seen as updates that need a config change at once: a group of the allowlist
upgraded to a supergroup (its id changed), or the bot removed from (or blocked in) an
allowlisted chat. Each is told on the pass that received it (exit 78), naming the change to
make, before any send to that chat fails."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from channels.config.loading import resolve_config_dir
from channels.config.model import CHANNELS_FILE
from channels.telegram.failures import Failure
from channels.telegram.identity import Channel
from channels.telegram.ignored import Ignored, ignored
from state.exit_codes import ExitCode

__all__ = ["alert_for"]


def alert_for(channel: Channel, result: Mapping[str, Any]) -> Failure | None:
    """The line for a processed update that changes an allowlisted chat, if it is one."""
    chat = result.get("chatId")
    profile = channel.profile
    if chat is None or str(chat) not in {str(c) for c in channel.recipients}:
        return None
    where = (f"telegramProfiles.{profile.name}.allowedChatIds in"
             f" {resolve_config_dir()}/{CHANNELS_FILE}")
    if result.get("result") == ignored(Ignored.CHAT_MIGRATED)["result"]:
        new = result.get("migrateToChatId")
        return Failure(f"group {chat} became supergroup {new}; replace {chat} with {new} in"
                       f" {where}, then run: piw-channels resend --all-failed --profile"
                       f" {profile.name}", ExitCode.CONFIG)
    if result.get("result") == ignored(Ignored.BOT_REMOVED)["result"]:
        return Failure(f"the bot was removed from (or blocked in) chat {chat}; add it back"
                       f" (or unblock it), or remove {chat} from {where}", ExitCode.CONFIG)
    return None
