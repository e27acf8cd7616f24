"""The Bot API methods the fake answers, each as the real server does.

``getMe``, ``sendMessage``, ``editMessageReplyMarkup``, ``editMessageText``,
``answerCallbackQuery``, ``setMessageReaction`` and ``setMyCommands`` answer like the Bot
API, including a field python-telegram-bot does not know, so clients prove they tolerate
one. ``getUpdates`` long-polls the queue, and a newer ``getUpdates`` ends it with 409.
``setWebhook``, ``getWebhookInfo`` and ``deleteWebhook`` keep the bot's webhook: while one is set,
``getUpdates`` is refused with 409, as Telegram refuses it.
``sendDocument`` takes an uploaded file (multipart) and keeps it: ``uploaded(params)`` gives a
recorded request's bytes back.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

from adapters.telegram.fake.bot_state import BotState
from adapters.telegram.fake.constants import (
    DEFAULT_REACTIONS,
    DESC_BAD_ENTITIES,
    DESC_BAD_MARKUP,
    DESC_CAPTION_TOO_LONG,
    DESC_CHAT_ID_EMPTY,
    DESC_CHAT_NOT_FOUND,
    DESC_CONFLICT_POLL,
    DESC_CONFLICT_WEBHOOK,
    DESC_EDIT_NOT_FOUND,
    DESC_FILE_EMPTY,
    DESC_METHOD_NOT_FOUND,
    DESC_NO_FILE,
    DESC_NOT_MODIFIED,
    DESC_QUERY_TOO_OLD,
    DESC_REACTION_INVALID,
    DESC_REACTION_NOT_FOUND,
    DESC_REACTIONS_TOO_MANY,
    DESC_TEXT_EMPTY,
    DESC_TEXT_TOO_LONG,
    DESC_TOO_LARGE,
    LONG_POLL_MAX_TIMEOUT,
    MAX_CAPTION_LENGTH,
    MAX_TEXT_LENGTH,
    MAX_UPLOAD_BYTES,
    UNKNOWN_FIELD,
)
from adapters.telegram.fake.records import Entry
from adapters.telegram.fake.wire import (
    Exchange,
    Reply,
    as_float,
    as_int,
    error_reply,
    ok_reply,
    updates_reply,
    uploaded,
)

__all__ = ["BotMethods", "default_bot_user"]


_Method = Callable[[dict[str, Any], int, Exchange], Reply | None]


class BotMethods:
    """Answers Bot API calls from, and into, the bot's state."""

    def __init__(self, state: BotState) -> None:
        self._state = state
        self._methods: dict[str, _Method] = {
            "getMe": lambda p, s, e: ok_reply(state.bot_user),
            "getUpdates": self._get_updates,
            "sendMessage": lambda p, s, e: self._send_message(p),
            "sendDocument": lambda p, s, e: self._send_document(p),
            "editMessageReplyMarkup": lambda p, s, e: self._edit_reply_markup(p),
            "editMessageText": lambda p, s, e: self._edit_text(p),
            "answerCallbackQuery": lambda p, s, e: self._answer_callback(p),
            "setMessageReaction": lambda p, s, e: self._set_reaction(p),
            "setMyCommands": lambda p, s, e: ok_reply(True),
            "setWebhook": lambda p, s, e: self._set_webhook(str(p.get("url") or "")),
            "deleteWebhook": lambda p, s, e: self._delete_webhook(p),
            "getWebhookInfo": lambda p, s, e: self._webhook_info(),
        }

    def call(self, entry: Entry, ex: Exchange) -> Reply | None:
        """The normal answer to a recorded request (None: close without answering)."""
        method = self._methods.get(entry.method)
        if method is None:
            return error_reply(404, DESC_METHOD_NOT_FOUND)
        reply = method(entry.params, entry.seq, ex)
        # What a send created is kept with its request (a transcript quotes it by message id);
        # getUpdates' batches are the pushed updates again, so they are not.
        if reply is not None and reply.status == 200 and entry.method != "getUpdates":
            self._state.note_result(entry, json.loads(reply.body).get("result"))
        return reply

    def _webhook_info(self) -> Reply:
        with self._state.cond:
            pending = len(self._state.updates)
            url = self._state.webhook_url
        return ok_reply(
            {"url": url, "has_custom_certificate": False, "pending_update_count": pending}
        )

    def _set_webhook(self, url: str) -> Reply:
        """An empty url removes the webhook, as in the Bot API."""
        with self._state.cond:
            self._state.webhook_url = url
        return ok_reply(True)

    def _delete_webhook(self, params: dict[str, Any]) -> Reply:
        """Remove the webhook; the queued updates stay unless ``drop_pending_updates``."""
        with self._state.cond:
            self._state.webhook_url = ""
            if str(params.get("drop_pending_updates")).lower() == "true":
                self._state.updates = []
        return ok_reply(True)

    def _get_updates(self, params: dict[str, Any], seq: int, ex: Exchange) -> Reply | None:
        """Long-poll the queue; a newer getUpdates ends this one with 409."""
        limit = min(max(as_int(params.get("limit")) or 100, 1), 100)
        timeout = min(max(as_float(params.get("timeout"), 0.0), 0.0), LONG_POLL_MAX_TIMEOUT)
        state = self._state
        with state.cond:
            if state.webhook_url:
                return error_reply(409, DESC_CONFLICT_WEBHOOK)
            state.confirm(as_int(params.get("offset")))
            state.set_allowed(params.get("allowed_updates"))
            state.start_poll(seq, ex)
            try:
                return self._poll(seq, ex, limit, time.monotonic() + timeout)
            finally:
                state.end_poll(seq)

    def _poll(self, seq: int, ex: Exchange, limit: int, deadline: float) -> Reply | None:
        """Wait (lock held) until updates, timeout, a newer poll, shutdown or hang-up."""
        state = self._state
        while True:
            if state.poll_owner != seq:
                return error_reply(409, DESC_CONFLICT_POLL)
            batch = state.deliverable(limit)
            remaining = deadline - time.monotonic()
            if batch or state.closing or remaining <= 0:
                return updates_reply(batch)
            # Short slices so a client that hung up is noticed and not counted as
            # overlapping the next poll.
            state.cond.wait(min(remaining, 0.05))
            if ex.client_gone():
                return None

    def _send_message(self, params: dict[str, Any]) -> Reply:
        chat_id = as_int(params.get("chat_id"))
        text = params.get("text")
        markup = params.get("reply_markup")
        if params.get("chat_id") in (None, ""):
            return error_reply(400, DESC_CHAT_ID_EMPTY)
        if chat_id is None:
            return error_reply(400, DESC_CHAT_NOT_FOUND)
        if not isinstance(text, str) or not text.strip():
            return error_reply(400, DESC_TEXT_EMPTY)
        if len(text) > MAX_TEXT_LENGTH:
            return error_reply(400, DESC_TEXT_TOO_LONG)
        if markup is not None and not isinstance(markup, dict):
            return error_reply(400, DESC_BAD_MARKUP)
        thread_id = as_int(params.get("message_thread_id"))
        entities = params.get("entities")
        if entities is not None and not _entities_fit(entities, text):
            return error_reply(400, DESC_BAD_ENTITIES)
        with self._state.cond:
            message_id = self._state.new_message_id(chat_id)
            message = self._build_message(message_id, chat_id, text, markup, thread_id)
            if entities:
                message["entities"] = entities
            self._state.messages.setdefault(chat_id, {})[message_id] = message
        return ok_reply(message)

    def _send_document(self, params: dict[str, Any]) -> Reply:
        """An uploaded file as a document message (a file id or URL is not taken here)."""
        chat_id = as_int(params.get("chat_id"))
        if params.get("chat_id") in (None, ""):
            return error_reply(400, DESC_CHAT_ID_EMPTY)
        if chat_id is None:
            return error_reply(400, DESC_CHAT_NOT_FOUND)
        data = uploaded(params)
        if data is None:
            return error_reply(400, DESC_NO_FILE)
        if not data:
            return error_reply(400, DESC_FILE_EMPTY)
        if len(data) > MAX_UPLOAD_BYTES:
            return error_reply(413, DESC_TOO_LARGE)
        caption = params.get("caption")
        if isinstance(caption, str) and len(caption) > MAX_CAPTION_LENGTH:
            return error_reply(400, DESC_CAPTION_TOO_LONG)
        digest = hashlib.sha256(data).hexdigest()
        with self._state.cond:
            message_id = self._state.new_message_id(chat_id)
            message = self._build_message(message_id, chat_id, "", None, None)
            message.pop("text")
            message["document"] = {
                "file_name": params["document"]["file_name"],
                "mime_type": params["document"]["mime_type"].split(";")[0] or "text/plain",
                "file_id": f"BQACAgQAAx{digest[:40]}", "file_unique_id": f"AgAD{digest[:12]}",
                "file_size": len(data)}
            if isinstance(caption, str) and caption:
                message["caption"] = caption
            self._state.messages.setdefault(chat_id, {})[message_id] = message
        return ok_reply(message)

    def _build_message(
        self, message_id: int, chat_id: int, text: str,
        markup: dict[str, Any] | None, thread_id: int | None,
    ) -> dict[str, Any]:  # fmt: skip
        bot_user = self._state.bot_user
        message: dict[str, Any] = {"message_id": message_id}
        if thread_id is not None:
            message |= {"message_thread_id": thread_id}
        message |= {
            "from": {k: bot_user[k] for k in ("id", "is_bot", "first_name", "username")},
            "chat": _chat(chat_id, forum=thread_id is not None),
            "date": int(time.time()),
        }
        if thread_id is not None:
            message["is_topic_message"] = True
        message["text"] = text
        # Telegram echoes inline keyboards only, never ForceReply.
        if markup and markup.get("inline_keyboard"):
            message["reply_markup"] = {"inline_keyboard": markup["inline_keyboard"]}
        message[UNKNOWN_FIELD] = {"note": "a field python-telegram-bot does not know"}
        return message

    def _edit_reply_markup(self, params: dict[str, Any]) -> Reply:
        """Replace a sent message's keyboard; unknown messages and no-ops fail as on Telegram."""
        if params.get("inline_message_id"):
            return ok_reply(True)
        chat_id = as_int(params.get("chat_id"))
        message_id = as_int(params.get("message_id"))
        markup = params.get("reply_markup")
        if markup is not None and not isinstance(markup, dict):
            return error_reply(400, DESC_BAD_MARKUP)
        keyboard = (markup or {}).get("inline_keyboard") or []
        with self._state.cond:
            stored = self._state.messages.get(chat_id or 0, {}).get(message_id or 0)
            if stored is None:
                return error_reply(400, DESC_EDIT_NOT_FOUND)
            current = (stored.get("reply_markup") or {}).get("inline_keyboard") or []
            if current == keyboard:
                return error_reply(400, DESC_NOT_MODIFIED)
            stored.pop("reply_markup", None)
            if keyboard:
                stored["reply_markup"] = {"inline_keyboard": keyboard}
            stored["edit_date"] = int(time.time())
            return ok_reply(dict(stored))

    def _edit_text(self, params: dict[str, Any]) -> Reply:
        """Replace a sent message's text (its keyboard stays unless one is given), as
        Telegram does: an unknown message, or the same text again, is an error."""
        chat_id = as_int(params.get("chat_id"))
        message_id = as_int(params.get("message_id"))
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            return error_reply(400, DESC_TEXT_EMPTY)
        if len(text) > MAX_TEXT_LENGTH:
            return error_reply(400, DESC_TEXT_TOO_LONG)
        entities = params.get("entities")
        if entities is not None and not _entities_fit(entities, text):
            return error_reply(400, DESC_BAD_ENTITIES)
        with self._state.cond:
            stored = self._state.messages.get(chat_id or 0, {}).get(message_id or 0)
            if stored is None:
                return error_reply(400, DESC_EDIT_NOT_FOUND)
            if stored.get("text") == text and stored.get("entities") == entities:
                return error_reply(400, DESC_NOT_MODIFIED)
            stored["text"] = text
            stored.pop("entities", None)
            if entities:
                stored["entities"] = entities
            stored["edit_date"] = int(time.time())
            return ok_reply(dict(stored))

    def _set_reaction(self, params: dict[str, Any]) -> Reply:
        """Set the bot's reaction on a message of a chat (one at most, from the default set;
        an empty or absent list removes it), as Telegram does: kept per message, for tests."""
        chat_id = as_int(params.get("chat_id"))
        message_id = as_int(params.get("message_id"))
        if params.get("chat_id") in (None, ""):
            return error_reply(400, DESC_CHAT_ID_EMPTY)
        reaction = params.get("reaction") or []
        if not isinstance(reaction, list) or any(
                not isinstance(r, dict) or r.get("type") != "emoji"
                or r.get("emoji") not in DEFAULT_REACTIONS for r in reaction):
            return error_reply(400, DESC_REACTION_INVALID)
        if len(reaction) > 1:
            return error_reply(400, DESC_REACTIONS_TOO_MANY)
        if chat_id is None or message_id is None or not self._state.knows_message(
                chat_id, message_id):
            return error_reply(400, DESC_REACTION_NOT_FOUND)
        self._state.set_reaction(chat_id, message_id, [str(r["emoji"]) for r in reaction])
        return ok_reply(True)

    def _answer_callback(self, params: dict[str, Any]) -> Reply:
        if not self._state.answer_callback(params.get("callback_query_id")):
            return error_reply(400, DESC_QUERY_TOO_OLD)
        return ok_reply(True)


def default_bot_user(token: str) -> dict[str, Any]:
    """The User getMe returns unless a test gives one; its id is the token's bot id."""
    prefix = token.split(":", 1)[0]
    bot_id = int(prefix) if prefix.isdigit() else 7_000_000_001
    return {
        "id": bot_id,
        "is_bot": True,
        "first_name": "PiW Decisions",
        "username": "piw_decisions_bot",
        "can_join_groups": True,
        "can_read_all_group_messages": False,
        "supports_inline_queries": False,
        "can_connect_to_business": False,
        "has_main_web_app": False,
    }


def _chat(chat_id: int, *, forum: bool) -> dict[str, Any]:
    """A plausible Chat object for an id: private (>0), supergroup (-100...) or group."""
    if chat_id > 0:
        return {"id": chat_id, "first_name": "Ada", "username": "ada_ops", "type": "private"}
    if str(chat_id).startswith("-100"):
        chat: dict[str, Any] = {"id": chat_id, "title": "PiW Ops", "type": "supergroup"}
        if forum:
            chat["is_forum"] = True
        return chat
    return {"id": chat_id, "title": "PiW Ops", "type": "group"}


def _entities_fit(entities: object, text: str) -> bool:
    """Entities as Telegram checks them: a list of objects inside the text (UTF-16 units)."""
    units = len(text.encode("utf-16-le")) // 2
    if not isinstance(entities, list):
        return False
    for entity in entities:
        if not isinstance(entity, dict):
            return False
        offset, length = as_int(entity.get("offset")), as_int(entity.get("length"))
        if offset is None or length is None or offset < 0 or length <= 0 or \
                offset + length > units:
            return False
        user = entity.get("user")
        if entity.get("type") == "text_mention" and not (
                isinstance(user, dict) and as_int(user.get("id")) is not None):
            return False
    return True
