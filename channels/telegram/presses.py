"""Presses that arrive without their message: bound to a decision by their callback data alone.

Telegram may send a press with no `message` (a bot whose `callback_query_mode` lets presses
arrive with `inline_message_id` instead, Bot API 10.5; or a client that leaves it out). The
data is still our token, so it names the decision and the choice; what is missing is the chat,
which the allowlist needs. The press is bound to a chat that got the card and allows this
person (their private chat first), or refused with a recorded reason. Reads only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import apsw

from channels.telegram.buttons import SETTLED_RE, TOKEN_RE, ButtonIndex
from channels.telegram.identity import Channel
from channels.telegram.ignored import Ignored
from channels.telegram.sent import delivered_recipients

__all__ = ["Refused", "bind_detached"]


@dataclass(frozen=True, slots=True)
class Refused:
    """A press that cannot be bound: the reason recorded, the answer shown."""

    reason: Ignored
    text: str


def bind_detached(conn: apsw.Connection, channel: Channel, index: ButtonIndex,
                  press: dict[str, Any], now: int) -> dict[str, Any] | Refused:
    """The press with the chat it is bound to, or why it is refused."""
    user, data = str(press["userId"]), press.get("data")
    if user not in channel.profile.allowed_user_ids:
        return Refused(Ignored.NOT_ALLOWED, "You are not allowed to answer this decision.")
    if isinstance(data, str) and SETTLED_RE.fullmatch(data):
        return Refused(Ignored.SETTLED_BUTTON, "This decision is decided.")
    found = index.find(conn, channel.channel_id, data, now) \
        if isinstance(data, str) and TOKEN_RE.fullmatch(data) else None
    if found is None:
        return Refused(Ignored.UNKNOWN_BUTTON, "This button is not valid.")
    chats = [chat for _, chat in delivered_recipients(conn, channel.channel_id, found[0])
             if channel.profile.allows(user, chat)]
    if not chats:
        return Refused(Ignored.NO_MESSAGE, "This button cannot be used here.")
    chat = user if user in chats else chats[0]
    return {**press, "chatId": int(chat), "threadId": None}
