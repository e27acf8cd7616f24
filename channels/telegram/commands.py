"""The bot's commands in an allowlisted chat, and the menu that offers them.

`/pending`: the open decisions, numbered, then their cards again (a copy each, with live
buttons). `/mute 1h`: no progress cards in that chat for an hour (`muting`). `MENU` is what
`setup telegram` registers as the chat's command menu (setMyCommands); `HANDLERS` is what the
bot does for each command it accepts. They name the same commands
(tests/channels/telegram/test_answers_in_chat.py), so the menu offers every command the bot
answers and nothing else. Runs inside the inbox transaction (`inbound`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import apsw

from channels.decisions import records
from channels.telegram.identity import Channel
from channels.telegram.ignored import Ignored, ignored
from channels.telegram.muting import MUTE_USAGE, parse_mute, set_mute
from channels.telegram.reservations import open_routed_decisions, reserve_copy, reserve_notice
from channels.telegram.text_answers import MAX_LISTED, pending_list
from state.leases import Lease

__all__ = ["HANDLERS", "MENU", "run"]


# (command, description) in the menu's order; Telegram shows the description beside it.
MENU: Final = (
    ("pending", "List the decisions that wait for an answer"),
    ("mute", "Mute progress cards in this chat: /mute 1h (30m, 2h, 1d), /mute off"),
)


@dataclass(frozen=True, slots=True)
class _Said:
    """One command from an allowed person: the chat, the message (the reply goes to it) and
    the words after the command."""

    chat: str
    message: Any
    args: str


_Handler = Callable[[apsw.Connection, Channel, _Said, int, Lease], dict[str, Any]]


def _mute(conn: apsw.Connection, channel: Channel, said: _Said, now: int,
          lease: Lease) -> dict[str, Any]:
    ms = parse_mute(said.args)
    text = MUTE_USAGE if ms is None else \
        set_mute(conn, lease, channel.channel_id, said.chat, ms, now)
    reserve_notice(conn, channel, None, said.chat, said.message, text,
                   f"command:{said.chat}:{said.message}", lease.actor, now)
    if ms is None:
        return ignored(Ignored.BAD_DURATION)
    return {"result": "muted" if ms else "unmuted"}


def _pending(conn: apsw.Connection, channel: Channel, said: _Said, now: int,
             lease: Lease) -> dict[str, Any]:
    chat, message = said.chat, said.message
    waiting = [records.load(conn, d) for d in open_routed_decisions(conn, channel, now)]
    reserve_notice(conn, channel, None, chat, message, pending_list(
        [(str(d.request.document["title"]), d.request.presentation_digest,
          d.asker()) for d in waiting]),
        f"command:{chat}:{message}", lease.actor, now)
    for order, decision in enumerate(waiting[:MAX_LISTED], start=1):
        # Effects go out oldest first: a millisecond apart, the cards follow the list in order.
        reserve_copy(conn, channel, decision.decision_id, chat, f"{chat}:{message}",
                     lease.actor, now + order)
    return {"result": "listed", "count": len(waiting)}


HANDLERS: Final[Mapping[str, _Handler]] = {"pending": _pending, "mute": _mute}


def run(conn: apsw.Connection, channel: Channel, payload: Mapping[str, Any], now: int,
        lease: Lease) -> dict[str, Any]:
    """Act on a command from the inbox (through the allowlist); the row's result."""
    user, chat, message = payload.get("userId"), payload.get("chatId"), payload.get("messageId")
    if user is None or chat is None or message is None:
        return ignored(Ignored.MALFORMED)
    if not channel.profile.allows(str(user), str(chat)):
        return ignored(Ignored.NOT_ALLOWED)
    handler = HANDLERS.get(str(payload.get("command")))
    if handler is None:
        return ignored(Ignored.UNKNOWN_COMMAND)
    return handler(conn, channel, _Said(str(chat), message, str(payload.get("args") or "")),
                   now, lease)

