"""The fake bot's state: the updates queue, sent messages, callback queries, recorded requests.

Everything here is guarded by one condition variable (``cond``, re-entrant):
handler threads change the state, and tests and long polls wait on it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from adapters.telegram.fake.constants import (
    ALL_UPDATE_TYPES,
    CALLBACK_ID_BASE,
    FIRST_UPDATE_ID,
    TELEGRAM_DEFAULT_UPDATES,
)
from adapters.telegram.fake.faults import Fault, FaultQueue
from adapters.telegram.fake.records import Entry, Overlap, PushedUpdate, RecordedRequest
from adapters.telegram.fake.wire import RAW_ITEM, Exchange, as_int, canonical

__all__ = ["BotState"]


class BotState:
    """What the fake bot remembers between requests."""

    def __init__(self, bot_user: Mapping[str, Any], *, privacy_mode: bool = False,
                 first_update_id: int = FIRST_UPDATE_ID) -> None:
        self.cond = threading.Condition()
        self.bot_user = dict(bot_user)
        self.privacy_mode = privacy_mode
        self.faults = FaultQueue()
        self.closing = False
        self.updates: list[dict[str, Any]] = []
        self.allowed: frozenset[str] = TELEGRAM_DEFAULT_UPDATES
        self.poll_owner: int | None = None
        self.webhook_url = ""  # set: getUpdates is refused (409), as by Telegram
        # chat id -> message id -> the Message as sent (and edited since)
        self.messages: dict[int, dict[int, dict[str, Any]]] = {}
        self._seq = 0
        self._entries: list[Entry] = []
        self._next_update_id = first_update_id
        self._polls: dict[int, Exchange] = {}
        self._overlaps: list[Overlap] = []
        self._release_generation = 0
        self._last_message_id: dict[int, int] = {}
        self._callback_ids: set[str] = set()
        self._answered: list[str] = []
        self._pushed: list[PushedUpdate] = []
        self._reactions: dict[tuple[int, int], list[str]] = {}  # the bot's, per message

    # ---- updates

    def push_update(self, update: Mapping[str, Any]) -> int:
        """Queue an update for getUpdates; assigns the next update_id when absent."""
        with self.cond:
            given = as_int(update.get("update_id"))
            update_id = self._next_update_id if given is None else given
            # update_id leads, as on the wire.
            item = {"update_id": update_id} | {k: v for k, v in update.items() if k != "update_id"}
            self._number_message(item)
            self._next_update_id = max(self._next_update_id, update_id + 1)
            self._pushed.append(PushedUpdate(self._seq, time.time(), dict(item)))
            if self.privacy_mode and not self._visible_in_privacy_mode(item):
                return update_id  # Telegram never gives this bot the update at all
            self.updates = sorted(
                [u for u in self.updates if u["update_id"] != update_id] + [item],
                key=lambda u: int(u["update_id"]),
            )
            self._note_update(item)
            self.cond.notify_all()
            return update_id

    def _number_message(self, update: dict[str, Any]) -> None:
        """A message pushed without a ``message_id`` gets its chat's next one, as a person's
        message in that chat would (``demo --reply`` relies on it)."""
        message = update.get("message")
        if not isinstance(message, dict) or "message_id" in message:
            return
        chat_id = as_int((message.get("chat") or {}).get("id"))
        if chat_id is not None:
            update["message"] = {"message_id": self.new_message_id(chat_id), **message}

    def push_raw_update(self, text: str, update_id: int | None = None) -> int:
        """Queue one batch item as raw JSON text, served byte for byte (a malformed item).

        ``update_id`` is where the item sits in the queue (the id the server knows it by,
        whatever the text says); it is confirmed like any update by an offset above it.
        """
        with self.cond:
            position = self._next_update_id if update_id is None else update_id
            self._next_update_id = max(self._next_update_id, position + 1)
            self.updates = sorted(
                [u for u in self.updates if u["update_id"] != position]
                + [{"update_id": position, RAW_ITEM: text}],
                key=lambda u: int(u["update_id"]),
            )
            self.cond.notify_all()
            return position

    def _visible_in_privacy_mode(self, update: Mapping[str, Any]) -> bool:
        """Privacy mode (a bot's default): in groups the bot gets only commands, replies to
        its own messages and service messages, never other messages."""
        message = update.get("message")
        if not isinstance(message, dict):
            return True
        if (message.get("chat") or {}).get("type") not in ("group", "supergroup"):
            return True
        if any(key in message for key in _SERVICE_FIELDS):
            return True
        if str(message.get("text", "")).startswith("/"):
            return True
        replied = message.get("reply_to_message")
        sender = (replied or {}).get("from") if isinstance(replied, dict) else None
        return isinstance(sender, dict) and sender.get("id") == self.bot_user.get("id")

    def _note_update(self, update: Mapping[str, Any]) -> None:
        """Track message ids and callback ids an update introduces."""
        for message in _update_chat_messages(update):
            chat_id = as_int((message.get("chat") or {}).get("id"))
            message_id = as_int(message.get("message_id"))
            if chat_id is not None and message_id is not None:
                last = self._last_message_id.get(chat_id, 0)
                self._last_message_id[chat_id] = max(last, message_id)
        callback = update.get("callback_query")
        if isinstance(callback, dict) and isinstance(callback.get("id"), str):
            self._callback_ids.add(callback["id"])

    def fixture_defaults(self) -> dict[str, object]:
        """Placeholder values for the next pushed fixture: fresh ids, now, this bot."""
        with self.cond:
            return {
                "update_id": self._next_update_id,
                "date": int(time.time()),
                "callback_query_id": str(CALLBACK_ID_BASE + self._next_update_id),
                "bot_id": self.bot_user["id"],
                "bot_username": self.bot_user["username"],
            }

    def confirm(self, offset: int | None) -> None:
        """Forget the updates an offset confirms (a negative one keeps the last ``-offset``)."""
        if offset is None or offset == 0:
            return
        if offset > 0:
            self.updates = [u for u in self.updates if int(u["update_id"]) >= offset]
        else:
            self.updates = self.updates[offset:]

    def set_allowed(self, value: object) -> None:
        """Change the update-type mask as getUpdates' ``allowed_updates`` does."""
        # Missing or unparseable keeps the previous mask; unknown names are ignored [A1].
        if not isinstance(value, list):
            return
        known = frozenset(v for v in value if isinstance(v, str)) & ALL_UPDATE_TYPES
        if known:
            self.allowed = known
        else:
            self.allowed = TELEGRAM_DEFAULT_UPDATES

    def deliverable(self, limit: int) -> list[dict[str, Any]]:
        """The first ``limit`` queued updates the current mask lets through."""
        return [u for u in self.updates
                if RAW_ITEM in u or _update_type(u) in self.allowed][:limit]

    # ---- long polls

    def start_poll(self, seq: int, exchange: Exchange) -> None:
        """Register a getUpdates; it takes over from (and overlaps) any still connected."""
        for earlier, other in list(self._polls.items()):
            if not other.client_gone():
                self._overlaps.append(Overlap(earlier, seq, time.time()))
        self._polls[seq] = exchange
        self.poll_owner = seq

    def end_poll(self, seq: int) -> None:
        """The getUpdates ``seq`` has its answer."""
        del self._polls[seq]

    # ---- messages and callback queries

    def new_message_id(self, chat_id: int) -> int:
        """The next message id in a chat, as Telegram numbers them."""
        with self.cond:
            message_id = self._last_message_id.get(chat_id, 0) + 1
            self._last_message_id[chat_id] = message_id
            return message_id

    def knows_message(self, chat_id: int, message_id: int) -> bool:
        """A message of the chat as far as the fake knows: sent by the bot, or numbered at or
        below the chat's newest (a person's message arrives in an update)."""
        with self.cond:
            return message_id in self.messages.get(chat_id, {}) or \
                0 < message_id <= self._last_message_id.get(chat_id, 0)

    def set_reaction(self, chat_id: int, message_id: int, emoji: list[str]) -> None:
        """Record the bot's reaction on a message (an empty list removes it)."""
        with self.cond:
            self._reactions[(chat_id, message_id)] = list(emoji)

    def reactions(self) -> dict[tuple[int, int], list[str]]:
        """The bot's reaction on each message it reacted to: (chat, message) -> emoji."""
        with self.cond:
            return {k: list(v) for k, v in self._reactions.items() if v}

    def answer_callback(self, query_id: object) -> bool:
        """Record an answer to a known callback query; False for an unknown one."""
        with self.cond:
            if not isinstance(query_id, str) or query_id not in self._callback_ids:
                return False
            self._answered.append(query_id)
            return True

    # ---- recorded requests

    def record(
        self, method: str, http_method: str, content_type: str, body: bytes,
        wire: tuple[dict[str, str], dict[str, Any]], token_ok: bool, fault: Fault | None,
    ) -> Entry:  # fmt: skip
        """Record a request as it arrives."""
        with self.cond:
            self._seq += 1
            entry = Entry(
                self._seq, method, http_method, content_type, body, wire[0], wire[1],
                token_ok, fault.kind.value if fault else None, time.time(),
            )  # fmt: skip
            self._entries.append(entry)
            self.cond.notify_all()
            return entry

    def note_result(self, entry: Entry, result: Any) -> None:
        """Keep what an ``ok`` answer carried (the Message a send created)."""
        with self.cond:
            entry.result = result

    def finish(self, entry: Entry, status: int | None) -> None:
        """Record the end of a request and the HTTP status sent (None: no response)."""
        with self.cond:
            entry.ended_at = time.time()
            entry.status = status

    # ---- hangs, delays and shutdown

    def release(self) -> None:
        """Let every request currently held by a ``hang`` fault proceed."""
        with self.cond:
            self._release_generation += 1
            self.cond.notify_all()

    def hold(self) -> bool:
        """Wait for release(); False if the server closed meanwhile."""
        with self.cond:
            generation = self._release_generation
            self.cond.wait_for(lambda: self.closing or self._release_generation != generation)
            return not self.closing

    def pause(self, seconds: float) -> bool:
        """Wait ``seconds``; False if the server closed meanwhile."""
        with self.cond:
            self.cond.wait_for(lambda: self.closing, seconds)
            return not self.closing

    def close(self) -> None:
        """Wake every held request and long poll: the server is closing."""
        with self.cond:
            self.closing = True
            self.cond.notify_all()

    # ---- what tests read

    def requests(self, method: str | None = None) -> list[RecordedRequest]:
        """Requests received so far (all, or those of one method), oldest first."""
        wanted = canonical(method) if method else None
        with self.cond:
            return [e.snapshot() for e in self._entries if wanted in (None, e.method)]

    def overlaps(self) -> list[Overlap]:
        """Every time a getUpdates arrived while another was in flight."""
        with self.cond:
            return list(self._overlaps)

    def pushed_updates(self) -> list[PushedUpdate]:
        """Every update pushed so far (also those confirmed since), oldest first."""
        with self.cond:
            return list(self._pushed)

    def pending_updates(self) -> list[dict[str, Any]]:
        """Updates queued and not yet confirmed by an offset."""
        with self.cond:
            return [dict(u) for u in self.updates]

    def answered_callbacks(self) -> list[str]:
        """callback_query ids answered with answerCallbackQuery, in order."""
        with self.cond:
            return list(self._answered)

    def sent_messages(self, chat_id: int) -> list[dict[str, Any]]:
        """Messages the fake has sent (and currently holds) in a chat."""
        with self.cond:
            return [dict(m) for m in self.messages.get(chat_id, {}).values()]

    def keyboards(self) -> list[dict[str, Any]]:
        """Every held message that still shows an inline keyboard, oldest chat first."""
        with self.cond:
            return [{"chat_id": chat, "message_id": m["message_id"], "text": m.get("text", ""),
                     "inline_keyboard": m["reply_markup"]["inline_keyboard"]}
                    for chat, held in self.messages.items() for m in held.values()
                    if (m.get("reply_markup") or {}).get("inline_keyboard")]

    def wait_received(self, method: str, count: int = 1, timeout: float = 5.0) -> bool:
        """Block until at least ``count`` requests of ``method`` have *arrived*."""
        wanted = canonical(method)
        with self.cond:
            return self.cond.wait_for(
                lambda: sum(1 for e in self._entries if e.method == wanted) >= count, timeout
            )


# Service messages reach a bot in privacy mode too (a migration, members joining or leaving).
_SERVICE_FIELDS = frozenset({
    "migrate_to_chat_id", "migrate_from_chat_id", "new_chat_members", "left_chat_member",
    "new_chat_title", "group_chat_created", "supergroup_chat_created", "pinned_message",
})


def _update_type(update: Mapping[str, Any]) -> str | None:
    kinds = [key for key in update if key != "update_id"]
    return kinds[0] if kinds else None


def _update_chat_messages(update: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Messages carried by an update (for message-id bookkeeping)."""
    found = []
    for key in ("message", "edited_message", "channel_post", "edited_channel_post"):
        if isinstance(update.get(key), dict):
            found.append(update[key])
    callback = update.get("callback_query")
    if isinstance(callback, dict) and isinstance(callback.get("message"), dict):
        found.append(callback["message"])
    return found
