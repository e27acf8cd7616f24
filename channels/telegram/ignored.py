"""Why an inbox event was ignored: recorded as its result, `{"result": "ignored:<reason>"}`.

The reasons this channel decides are members of `Ignored`; an update of a kind it does not act
on (`edited_message`, `poll`, ...) is ignored under its Telegram kind, as `updates` names it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

__all__ = ["Ignored", "ignored"]


class Ignored(StrEnum):
    NO_USER = "no_user"  # a press with no user
    NOT_ALLOWED = "not_allowed"  # a user or chat the profile does not allow
    UNKNOWN_BUTTON = "unknown_button"  # callback data of no decision we presented
    SETTLED_BUTTON = "settled_button"  # a press on a decided decision's card
    NO_MESSAGE = "no_message"  # a detached press that names no decision
    MALFORMED = "malformed"
    UNBOUND_REPLY = "unbound_reply"  # a reply to no prompt of ours
    NOT_TEXT = "not_text"
    UNCLEAR_TEXT = "unclear_text"  # a text that names no choice
    UNKNOWN_COMMAND = "unknown_command"
    BAD_DURATION = "bad_duration"  # `/mute` with a duration it cannot read
    CHAT_MIGRATED = "chat_migrated"  # a group became a supergroup
    BOT_REMOVED = "bot_removed"  # the bot left or was removed from a chat
    ERROR = "error"  # the row hit a bug or contradicted what is stored: undone alone


def ignored(reason: Ignored | str) -> dict[str, Any]:
    """The inbox result of an ignored event (`reason`: a member, or an update's kind)."""
    return {"result": f"ignored:{reason}"}
