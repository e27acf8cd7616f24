"""Telegram updates -> minimal validated inbox events (pure).

Only what processing needs is kept (ids, callback data, reply target, text); the raw update is
never stored. Anything that is not a callback query or a reply becomes an `other` event that is
processed as `ignored:<reason>`, so nothing is fetched or retried forever.
"""

from __future__ import annotations

from typing import Any

from channels.inbox import InboundEvent

MAX_CALLBACK_DATA_BYTES = 64


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def update_id(update: Any) -> int | None:
    """The update's id, or None when it has none (such an update cannot be confirmed)."""
    return _int(update.get("update_id")) if isinstance(update, dict) else None


def to_event(update: Any) -> InboundEvent | None:
    """The inbox event for one raw update (None when it has no usable update_id)."""
    uid = update_id(update)
    if uid is None:
        return None
    event_id = str(uid)
    if isinstance(update.get("callback_query"), dict):
        return InboundEvent(event_id, "callback", _callback(update["callback_query"]))
    message = update.get("message")
    if isinstance(message, dict) and isinstance(message.get("reply_to_message"), dict):
        return InboundEvent(event_id, "reply", _reply(message))
    kind = next((k for k in update if k != "update_id"), "empty")
    reason = "plain_message" if kind == "message" else str(kind)[:64]
    return InboundEvent(event_id, "other", {"kind": reason})


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _callback(query: dict[str, Any]) -> dict[str, Any]:
    sender = _object(query.get("from"))
    message = _object(query.get("message"))
    chat = _object(message.get("chat"))
    data = query.get("data")
    return {
        "callbackId": query.get("id") if isinstance(query.get("id"), str) else None,
        "userId": _int(sender.get("id")),
        "chatId": _int(chat.get("id")),
        "messageId": _int(message.get("message_id")),
        "threadId": _int(message.get("message_thread_id")),
        # An inaccessible message arrives with date 0 (Bot API 7.0+).
        "accessible": bool(message) and message.get("date") != 0,
        "data": data if isinstance(data, str) and
        len(data.encode("utf-8")) <= MAX_CALLBACK_DATA_BYTES else None,
        "inline": "inline_message_id" in query,
    }


def _reply(message: dict[str, Any]) -> dict[str, Any]:
    sender = _object(message.get("from"))
    chat = _object(message.get("chat"))
    target = message["reply_to_message"]
    text = message.get("text")
    target_text = target.get("text")
    return {
        "messageId": _int(message.get("message_id")),
        "userId": _int(sender.get("id")),
        "chatId": _int(chat.get("id")),
        "threadId": _int(message.get("message_thread_id")),
        "replyTo": _int(target.get("message_id")),
        "text": text if isinstance(text, str) else None,
        # Kept so a reply can prove that a prompt left ambiguous by a crash did arrive.
        "replyToBot": _object(target.get("from")).get("is_bot") is True,
        "replyToText": target_text[:300] if isinstance(target_text, str) else None,
    }


def next_offset(updates: list[Any], current: int | None) -> int | None:
    """Last received update_id + 1 (never moving back)."""
    ids = [i for u in updates if (i := update_id(u)) is not None]
    if not ids:
        return current
    candidate = max(ids) + 1
    return candidate if current is None else max(current, candidate)
