"""Where a decision's card went on a channel: the chats, and the message carrying the keyboard
in each (what settlement edits, and what prompts, outcomes and reminders reply to). Reads only.
"""

from __future__ import annotations

import apsw

from channels import messages
from channels.messages import Purpose

__all__ = ["cards_and_recipients", "delivered_recipients", "keyboard_messages"]


def keyboard_messages(conn: apsw.Connection, channel_id: str,
                      decision_id: str) -> list[tuple[str, str]]:
    """(chat, message) of each recipient's last delivered part (the one with the keyboard)."""
    return cards_and_recipients(conn, channel_id, decision_id)[0]


def delivered_recipients(conn: apsw.Connection, channel_id: str,
                         decision_id: str) -> list[tuple[int, str]]:
    """(recipient index, chat) of every recipient with at least one confirmed part."""
    return cards_and_recipients(conn, channel_id, decision_id)[1]


def cards_and_recipients(conn: apsw.Connection, channel_id: str, decision_id: str
                         ) -> tuple[list[tuple[str, str]], list[tuple[int, str]]]:
    """`keyboard_messages` and `delivered_recipients` from one read of the delivery parts (a
    settlement needs both)."""
    keyboards: list[tuple[str, str]] = []
    recipients: dict[int, str] = {}
    for message in messages.messages_for_decision(conn, channel_id, decision_id,
                                                  [Purpose.DELIVERY]):
        parts = message.parts(conn)
        last = {part.recipient_index: part for part in parts}  # each recipient's last part
        for part in parts:
            if part.conversation_ref is not None:
                recipients.setdefault(part.recipient_index, part.conversation_ref)
        keyboards.extend((p.conversation_ref, p.message_ref) for p in last.values()
                         if p.conversation_ref is not None and p.message_ref is not None)
    return keyboards, sorted(recipients.items())
