"""Telegram updates -> minimal validated inbox events (pure, total: no input raises).

Only what processing needs is kept (ids, callback data, reply target, text); the raw update is
never stored. Anything that is not a callback query or a reply becomes an `other` event that is
processed as `ignored:<reason>`, so nothing is fetched or retried forever. Malformed items (not
an object, an `update_id` that is missing, of the wrong type or out of range) are events too:
they get an id derived from their content, so a re-fetch of the same bytes is deduplicated.

Every value kept is data the database and the Bot API can take: integers within the 52 bits
the Bot API promises (so canonical JSON keeps them exact), and text that is valid Unicode (a
lone surrogate is valid JSON but cannot be UTF-8 encoded, so it can never be sent back).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Final

from channels.inbox import InboundEvent

__all__ = ["MAX_ID", "next_offset", "press_field", "to_event"]


_MAX_CALLBACK_DATA_BYTES: Final = 64
# Bot API integers "have at most 52 significant bits": anything larger is not a Telegram id, and
# an update_id beyond it could not be confirmed exactly (nor stored as canonical JSON).
MAX_ID: Final = 2**53 - 1
_MALFORMED_PREFIX: Final = "malformed:"
_MAX_NAME: Final = 64  # Telegram's first_name limit
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and -MAX_ID <= value <= MAX_ID:
        return value
    return None


def _text(value: Any) -> str | None:
    """A string that can be UTF-8 encoded (no lone surrogate), else None."""
    if isinstance(value, str) and (value.isascii() or not _SURROGATE.search(value)):
        return value
    return None


def _update_id(update: Any) -> int | None:
    """The update's id, or None when it has no usable one (such an update cannot confirm a
    batch). Negative ids are refused: a negative offset would make Telegram forget updates."""
    uid = _int(update.get("update_id")) if isinstance(update, dict) else None
    return uid if uid is not None and uid >= 0 else None


def to_event(update: Any) -> InboundEvent:
    """The inbox event for one raw batch item (a malformed item is an `other` event)."""
    uid = _update_id(update)
    if uid is None:
        reason = "bad_update_id" if isinstance(update, dict) else "not_an_object"
        return InboundEvent(_malformed_id(update), "other", {"kind": reason})
    event_id = str(uid)
    if isinstance(update.get("callback_query"), dict):
        return InboundEvent(event_id, "callback", _callback(update["callback_query"]))
    message = update.get("message")
    if isinstance(message, dict) and isinstance(message.get("reply_to_message"), dict):
        return InboundEvent(event_id, "reply", _reply(message))
    if isinstance(message, dict) and _int(message.get("migrate_to_chat_id")) is not None:
        return InboundEvent(event_id, "other", _migration(message))
    if isinstance(update.get("my_chat_member"), dict):
        return InboundEvent(event_id, "other", _membership(update["my_chat_member"]))
    # Imported here: the answer rules it lives with are not needed until a message arrives.
    from channels.telegram.text_answers import command

    name = command(_text(message.get("text")) or "") if isinstance(message, dict) else None
    if name is not None and isinstance(message, dict):
        return InboundEvent(event_id, "other", _command(name, message))
    kind = next((k for k in update if k != "update_id"), "empty")
    reason = "plain_message" if kind == "message" else (_text(kind) or "unknown")[:64]
    return InboundEvent(event_id, "other", {"kind": reason})


def _command(name: str, message: dict[str, Any]) -> dict[str, Any]:
    """A bot command (`/pending`, `/mute 1h`: its words after the name in `args`): processed
    like an answer, through the allowlist."""
    said = (_text(message.get("text")) or "").split(None, 1)
    return {"kind": "command", "command": name, "args": said[1].strip()[:64] if len(said) > 1
            else "", "messageId": _int(message.get("message_id")),
            "userId": _int(_object(message.get("from")).get("id")),
            "chatId": _int(_object(message.get("chat")).get("id")),
            "threadId": _int(message.get("message_thread_id"))}


def _migration(message: dict[str, Any]) -> dict[str, Any]:
    """A group upgraded to a supergroup: the old id stops working; the new one is reported
    (an operator must allowlist it: piw-channels never guesses)."""
    return {"kind": "chat_migrated", "chatId": _int(_object(message.get("chat")).get("id")),
            "migrateToChatId": _int(message.get("migrate_to_chat_id"))}


def _membership(change: dict[str, Any]) -> dict[str, Any]:
    """The bot's own membership changed: removed from (or blocked in) a chat, or added."""
    status = _object(change.get("new_chat_member")).get("status")
    kind = "bot_removed" if status in ("left", "kicked") else "my_chat_member"
    return {"kind": kind, "chatId": _int(_object(change.get("chat")).get("id"))}


def _malformed_id(item: Any) -> str:
    """A stable id for an item without a usable update_id: a digest of its JSON form."""
    try:
        text = json.dumps(item, sort_keys=True, ensure_ascii=True)
    except (ValueError, TypeError, RecursionError):
        text = f"<{type(item).__name__} that cannot be encoded>"
    return _MALFORMED_PREFIX + hashlib.sha256(text.encode("ascii", "replace")).hexdigest()[:40]


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _callback(query: dict[str, Any]) -> dict[str, Any]:
    """A press, minimal: members that are null or what nearly every press says (a message
    that is accessible, not inline; the first name that is the full name) are left out, and
    read back through `press_field`. An inbox payload is stored for every press."""
    sender = _object(query.get("from"))
    message = _object(query.get("message"))
    chat = _object(message.get("chat"))
    data = _text(query.get("data"))
    name = _text(sender.get("first_name"))
    full = {
        # An id that is not valid text could never be answered: the press is still processed.
        "callbackId": _text(query.get("id")),
        "userId": _int(sender.get("id")),
        # Named in a group's prompt (a text_mention), so its reply box opens for this person.
        "userName": name[:_MAX_NAME] if name else None,
        # Named in the outcome post, as Telegram shows them ("Ada Lovelace chose Replan").
        "userFullName": _person_name(sender),
        "chatId": _int(chat.get("id")),
        "messageId": _int(message.get("message_id")),
        "threadId": _int(message.get("message_thread_id")),
        # An inaccessible message arrives with date 0 (Bot API 7.0+).
        "accessible": bool(message) and message.get("date") != 0,
        "data": data if data is not None and
        len(data.encode("utf-8")) <= _MAX_CALLBACK_DATA_BYTES else None,
        "inline": "inline_message_id" in query,
    }
    return {k: v for k, v in full.items() if v != _left_out(full, k)}


def _left_out(press: dict[str, Any], key: str) -> Any:
    """What a member left out of a press's payload means."""
    if key == "accessible":
        return True
    if key == "inline":
        return False
    if key == "userName":
        return press.get("userFullName")
    return None


def press_field(press: dict[str, Any], key: str) -> Any:
    """One member of a press's payload (payloads of earlier versions carry every member)."""
    return press[key] if key in press else _left_out(press, key)


def _first_name(sender: dict[str, Any]) -> str | None:
    name = _text(sender.get("first_name"))
    return name[:_MAX_NAME] if name else None


def _person_name(sender: dict[str, Any]) -> str | None:
    """The name Telegram shows for a user: first and last name, as they set them."""
    parts = [_text(sender.get(key)) for key in ("first_name", "last_name")]
    name = " ".join(part.strip() for part in parts if part and part.strip())
    return name[:_MAX_NAME] if name else None


def _reply(message: dict[str, Any]) -> dict[str, Any]:
    sender = _object(message.get("from"))
    chat = _object(message.get("chat"))
    target = message["reply_to_message"]
    target_text = _text(target.get("text"))
    return {
        "messageId": _int(message.get("message_id")),
        "userId": _int(sender.get("id")),
        "userName": _first_name(sender),
        "userFullName": _person_name(sender),
        "chatId": _int(chat.get("id")),
        "threadId": _int(message.get("message_thread_id")),
        "replyTo": _int(target.get("message_id")),
        "text": _text(message.get("text")),
        # Kept so a reply can prove that a prompt left ambiguous by a crash did arrive.
        "replyToBot": _object(target.get("from")).get("is_bot") is True,
        "replyToText": target_text[:300] if target_text is not None else None,
    }


def next_offset(updates: list[Any], current: int | None) -> int | None:
    """Last received usable update_id + 1 (never moving back)."""
    ids = [i for u in updates if (i := _update_id(u)) is not None]
    if not ids:
        return current
    candidate = max(ids) + 1
    return candidate if current is None else max(current, candidate)
