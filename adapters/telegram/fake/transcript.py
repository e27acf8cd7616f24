"""The chat as the person sees it: a transcript rendered from what the fake recorded.

What the bot did comes from the recorded requests (a sent message is rendered from its
request's text, entities, markup, ``reply_parameters`` and ``disable_notification``, and its
message id from the Message the fake answered); what the person did comes from the pushed
updates (presses, replies, messages). ``Transcript`` folds those events into lines and is
pure: no clock, no I/O, the same events give the same lines. ``TranscriptFollower`` feeds it
from a running fake, for ``demo --serve``.

Entities are shown readably: bold ``**…**``, italic ``_…_``, code in backquotes, ``pre`` as a
fenced block, a quote with ``> ``; buttons as ``[ Continue ] [ Replan ]``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from adapters.telegram.fake.records import PushedUpdate, RecordedRequest

if TYPE_CHECKING:
    from adapters.telegram.fake.server import FakeBotApi

__all__ = ["Transcript", "TranscriptFollower", "in_order", "readable", "render", "shorten"]


_Event = RecordedRequest | PushedUpdate

_INDENT: Final = "    "
_QUOTE_LENGTH: Final = 40
# Calls the person never sees anything of.
_INVISIBLE: Final = frozenset({
    "getMe", "getUpdates", "setWebhook", "deleteWebhook", "getWebhookInfo", "getChat",
    "getChatMember", "getMyCommands", "close", "logOut",
})
_INLINE_MARKS: Final = {
    "bold": ("**", "**"), "italic": ("_", "_"), "underline": ("__", "__"),
    "strikethrough": ("~~", "~~"), "spoiler": ("||", "||"), "code": ("`", "`"),
}
_QUOTES: Final = frozenset({"blockquote", "expandable_blockquote"})


def _clock(at: float) -> str:
    """`16:05:12` in UTC, as every transcript line starts."""
    return time.strftime("%H:%M:%S", time.gmtime(at))


def shorten(text: str, limit: int = _QUOTE_LENGTH) -> str:
    """The first non-empty line of a text, cut with "…" past `limit` characters."""
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def readable(text: str, entities: object) -> str:
    """The text with its message entities (UTF-16 offsets) shown as light markup."""
    units = text.encode("utf-16-le")
    spans = sorted(_spans(entities, len(units) // 2), key=lambda s: (s[0], -s[1]))
    # At one position closings come before openings, the innermost closing first.
    marks = sorted([(end, 0, -k, e) for k, (_, end, e) in enumerate(spans)]
                   + [(start, 1, k, e) for k, (start, _, e) in enumerate(spans)],
                   key=lambda m: m[:3])
    out: list[str] = []
    quoted, at = 0, 0
    for position, kind, _, entity in [*marks, (len(units) // 2, 2, 0, {})]:
        piece = units[2 * at : 2 * position].decode("utf-16-le", errors="replace")
        out.append(piece.replace("\n", "\n> ") if quoted else piece)
        at = position
        if kind == 2:
            break
        quoted += _mark(out, entity, opening=kind == 1)
    return "".join(out)


def _spans(entities: object, size: int) -> list[tuple[int, int, Mapping[str, Any]]]:
    """(start, end, entity) of the entities that lie inside a text of `size` UTF-16 units."""
    found = []
    for entity in _entity_list(entities):
        offset, length = _int(entity.get("offset")), _int(entity.get("length"))
        if offset is not None and length is not None and offset >= 0 and length > 0 \
                and offset + length <= size:
            found.append((offset, offset + length, entity))
    return found


def _mark(out: list[str], entity: Mapping[str, Any], *, opening: bool) -> int:
    """Append an entity's opening or closing mark; returns the change of quote depth."""
    kind = str(entity.get("type"))
    if kind in _INLINE_MARKS:
        out.append(_INLINE_MARKS[kind][0 if opening else 1])
    elif kind == "pre":
        so_far = "".join(out)
        language = str(entity.get("language") or "")
        out.append(_line_start(so_far) + f"```{language}\n" if opening
                   else ("" if so_far.endswith("\n") else "\n") + "```")
    elif kind == "text_link":
        out.append("[" if opening else f"]({entity.get('url', '')})")
    elif kind == "text_mention":
        user = entity.get("user")
        who = _int(user.get("id")) if isinstance(user, dict) else None
        out.append("[" if opening else f"](tg://user?id={who})")
    elif kind in _QUOTES:
        if opening:
            out.append(_line_start("".join(out)) + "> ")
        return 1 if opening else -1
    return 0


def _line_start(so_far: str) -> str:
    return "" if not so_far or so_far.endswith("\n") else "\n"


def _entity_list(entities: object) -> list[Mapping[str, Any]]:
    if isinstance(entities, str):  # a form field the fake could not decode
        try:
            entities = json.loads(entities)
        except ValueError:
            return []
    if not isinstance(entities, list):
        return []
    return [e for e in entities if isinstance(e, dict)]


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return None


def _truthy(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1"))


def _json(value: object) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _button_rows(markup: object) -> list[str]:
    """An inline keyboard as lines of `[ Label ]` (a URL button gets "↗")."""
    decoded = _json(markup)
    keyboard = decoded.get("inline_keyboard") if isinstance(decoded, dict) else None
    rows = []
    for row in keyboard if isinstance(keyboard, list) else []:
        cells = [f"[ {b.get('text', '')}{' ↗' if b.get('url') else ''} ]"
                 for b in row if isinstance(b, dict)] if isinstance(row, list) else []
        if cells:
            rows.append(" ".join(cells))
    return rows


def _name(user: object) -> str:
    if not isinstance(user, dict):
        return "someone"
    name = " ".join(str(user[k]) for k in ("first_name", "last_name") if user.get(k))
    return name or (f"@{user['username']}" if user.get("username") else f"user {user.get('id')}")


class Transcript:
    """Folds the fake's events into transcript lines, remembering what each message said."""

    def __init__(self) -> None:
        self._texts: dict[tuple[int, int], str] = {}
        self._keyboards: dict[tuple[int, int], list[Any]] = {}
        self._pressers: dict[str, str] = {}  # callback query id -> who pressed
        self.bot = "Bot"

    def lines(self, event: _Event) -> list[str]:
        """The lines one event adds (none for what the person cannot see)."""
        if isinstance(event, PushedUpdate):
            return self._person(event)
        if event.method == "getMe" and isinstance(event.result, dict):
            self.bot = str(event.result.get("first_name") or self.bot)
        if event.method in _INVISIBLE:
            return []
        params = event.params
        if not event.token_ok:
            return []  # Telegram answered 401; nothing reached any chat
        if event.method == "sendMessage":
            return self._sent(event, params)
        if event.method == "sendDocument" and event.status == 200:
            file = params.get("document")
            file = file if isinstance(file, dict) else {}
            caption = str(params.get("caption", ""))
            return [f"{_clock(event.started_at)} {self.bot} sent a file,"
                    f" {file.get('file_name', '?')}:", *_indented(caption)]
        if event.status != 200:
            return [f"{_clock(event.started_at)} × {event.method} failed"
                    f" ({_outcome(event)}); the chat does not change"]
        if event.method == "editMessageReplyMarkup":
            return self._markup_edit(event, params)
        if event.method == "editMessageText":
            return self._text_edit(event, params)
        if event.method == "answerCallbackQuery":
            return self._notice(event, params)
        if event.method == "setMessageReaction":
            return self._reaction(event, params)
        if event.method == "setMyCommands":
            commands = _json(params.get("commands")) or []
            listed = ", ".join(f"/{c.get('command')} ({c.get('description')})"
                               for c in commands if isinstance(c, dict))
            return [f"{_clock(event.started_at)} {self.bot} set its command menu:"
                    f" {listed or 'empty'}"]
        return [f"{_clock(event.started_at)} ({self.bot} called {event.method})"]

    # ---- what the bot did

    def _sent(self, event: RecordedRequest, params: Mapping[str, Any]) -> list[str]:
        message = event.result if isinstance(event.result, dict) else None
        when = _clock(event.started_at)
        if message is None:
            return [f"{when} × a message was not delivered ({_outcome(event)}):"
                    f" “{shorten(str(params.get('text', '')))}”"]
        chat = _int((message.get("chat") or {}).get("id")) or 0
        sender = message.get("from")
        if isinstance(sender, dict) and sender.get("first_name"):
            self.bot = str(sender["first_name"])
        message_id = _int(message.get("message_id")) or 0
        text = str(params.get("text", ""))
        self._texts[(chat, message_id)] = text
        markup = _json(params.get("reply_markup"))
        if isinstance(markup, dict) and markup.get("inline_keyboard"):
            self._keyboards[(chat, message_id)] = list(markup["inline_keyboard"])
        head = f"{when} {self.bot}{_where(chat, params)}"
        if _truthy(params.get("disable_notification")):
            head += " (silent)"
        replied = _replied_id(params)
        if replied is not None:
            head += f" ↪ replying to {self._quote(chat, replied)}"
        lines = [head + ":", *_indented(readable(text, params.get("entities")))]
        lines += [_INDENT + row for row in _button_rows(markup)]
        if isinstance(markup, dict) and _truthy(markup.get("force_reply")):
            hint = markup.get("input_field_placeholder")
            lines.append(_INDENT + "(the reply box opens" + (f": “{hint}”)" if hint else ")"))
        return lines

    def _markup_edit(self, event: RecordedRequest, params: Mapping[str, Any]) -> list[str]:
        chat, message_id = _int(params.get("chat_id")) or 0, _int(params.get("message_id")) or 0
        rows = _button_rows(params.get("reply_markup"))
        quote = self._quote(chat, message_id)
        when = _clock(event.started_at)
        if not rows:
            self._keyboards.pop((chat, message_id), None)
            return [f"{when} buttons removed from {quote}"]
        self._keyboards[(chat, message_id)] = list(
            (_json(params.get("reply_markup")) or {}).get("inline_keyboard") or [])
        return [f"{when} buttons of {quote} are now:", *(_INDENT + r for r in rows)]

    def _text_edit(self, event: RecordedRequest, params: Mapping[str, Any]) -> list[str]:
        chat, message_id = _int(params.get("chat_id")) or 0, _int(params.get("message_id")) or 0
        quote = self._quote(chat, message_id)
        text = str(params.get("text", ""))
        self._texts[(chat, message_id)] = text
        return [f"{_clock(event.started_at)} {self.bot} edited {quote}:",
                *_indented(readable(text, params.get("entities")))]

    def _reaction(self, event: RecordedRequest, params: Mapping[str, Any]) -> list[str]:
        chat, message_id = _int(params.get("chat_id")) or 0, _int(params.get("message_id")) or 0
        given = _json(params.get("reaction"))
        emoji = " ".join(str(r.get("emoji", "?")) for r in given if isinstance(r, dict)) \
            if isinstance(given, list) else ""
        what = f"reacted {emoji} to" if emoji else "took its reaction off"
        return [f"{_clock(event.started_at)} {self.bot} {what} {self._quote(chat, message_id)}"]

    def _notice(self, event: RecordedRequest, params: Mapping[str, Any]) -> list[str]:
        text = params.get("text")
        if not text:
            return []  # only the spinner on the button stops
        who = self._pressers.get(str(params.get("callback_query_id")), "the presser")
        kind = "an alert" if _truthy(params.get("show_alert")) else "a notice"
        return [f"{_clock(event.started_at)} {self.bot} shows {who} {kind}: “{text}”"]

    # ---- what the person did

    def _person(self, event: PushedUpdate) -> list[str]:
        update, when = event.update, _clock(event.at)
        press = update.get("callback_query")
        if isinstance(press, dict):
            return self._press(when, press)
        message = update.get("message") or update.get("edited_message")
        if isinstance(message, dict):
            return self._message(when, message, edited="edited_message" in update)
        member = update.get("my_chat_member")
        if isinstance(member, dict):
            status = (member.get("new_chat_member") or {}).get("status")
            chat = (member.get("chat") or {}).get("id")
            return [f"{when} {_name(member.get('from'))} changed the bot's membership in chat"
                    f" {chat}: {status}"]
        kinds = ", ".join(k for k in update if k != "update_id") or "nothing"
        return [f"{when} (an update the bot gets: {kinds})"]

    def _press(self, when: str, press: Mapping[str, Any]) -> list[str]:
        who = _name(press.get("from"))
        self._pressers[str(press.get("id"))] = who
        message = press.get("message")
        if not isinstance(message, dict):
            message = {}
        chat = _int((message.get("chat") or {}).get("id")) or 0
        message_id = _int(message.get("message_id")) or 0
        data = press.get("data")
        label = next((b.get("text") for row in self._keyboards.get((chat, message_id), [])
                      for b in row if isinstance(b, dict) and b.get("callback_data") == data),
                     None)
        button = f"[ {label} ]" if label is not None else f"a button ({data})"
        return [f"{when} {who} pressed {button} on {self._quote(chat, message_id)}"]

    def _message(self, when: str, message: Mapping[str, Any], *, edited: bool) -> list[str]:
        chat = _int((message.get("chat") or {}).get("id")) or 0
        text = str(message.get("text") or message.get("caption") or "")
        message_id = _int(message.get("message_id"))
        if message_id is not None:
            self._texts[(chat, message_id)] = text
        head = f"{when} {_name(message.get('from'))}{_where(chat, message)}"
        if edited:
            head += " (edited)"
        replied = message.get("reply_to_message")
        if isinstance(replied, dict):
            replied_id = _int(replied.get("message_id")) or 0
            known = self._texts.get((chat, replied_id))
            if known is None and replied.get("text"):
                self._texts[(chat, replied_id)] = str(replied["text"])
            head += f" ↪ replying to {self._quote(chat, replied_id)}"
        if not text:
            kinds = ", ".join(k for k in message if k not in _MESSAGE_FRAME) or "nothing"
            return [f"{head}: ({kinds})"]
        return [head + ":", *_indented(readable(text, message.get("entities")))]

    def _quote(self, chat: int, message_id: int) -> str:
        text = self._texts.get((chat, message_id))
        return f"message {message_id}" if text is None else f"“{shorten(text)}”"


_MESSAGE_FRAME: Final = frozenset({
    "message_id", "from", "chat", "date", "reply_to_message", "message_thread_id",
    "is_topic_message", "edit_date",
})


def _where(chat: int, fields: Mapping[str, Any]) -> str:
    """Where a message is, when it is not the private chat the rehearsal uses."""
    where = f" in chat {chat}" if chat < 0 else ""
    topic = _int(fields.get("message_thread_id"))
    return where + (f", topic {topic}" if topic is not None else "")


def _replied_id(params: Mapping[str, Any]) -> int | None:
    reply = _json(params.get("reply_parameters"))
    if isinstance(reply, dict) and _int(reply.get("message_id")) is not None:
        return _int(reply.get("message_id"))
    return _int(params.get("reply_to_message_id"))


def _outcome(event: RecordedRequest) -> str:
    if event.status is None:
        return "no answer: it may or may not have arrived"
    return f"HTTP {event.status}"


def _indented(text: str) -> list[str]:
    return [_INDENT + line if line else "" for line in text.split("\n")]


def render(events: Iterable[_Event]) -> list[str]:
    """The whole transcript of events given in the order they happened."""
    transcript = Transcript()
    return [line for event in events for line in transcript.lines(event)]


def in_order(requests: Sequence[RecordedRequest], pushed: Sequence[PushedUpdate]) -> list[_Event]:
    """Requests and pushed updates merged in the order they happened."""
    def key(event: _Event) -> tuple[float, int]:
        if isinstance(event, PushedUpdate):
            return (event.at, event.after_seq)
        return (event.started_at, event.seq)

    return sorted([*requests, *pushed], key=key)


class TranscriptFollower:
    """New transcript lines of a running fake, each time it is asked (for `demo --serve`).

    A request is rendered once it has ended (a send shows once its Message exists), so a
    long poll in flight never holds the transcript up.
    """

    def __init__(self, fake: FakeBotApi) -> None:
        self._fake = fake
        self._transcript = Transcript()
        self._done: set[int] = set()
        self._pushed = 0

    def new_lines(self) -> list[str]:
        """Lines for what happened since the last call."""
        ready = []
        for request in self._fake.requests():
            if request.seq in self._done:
                continue
            if request.method == "getUpdates":  # never waited for: a long poll takes long
                self._done.add(request.seq)
            elif request.ended_at is not None or request.result is not None:
                self._done.add(request.seq)
                ready.append(request)
        pushed = self._fake.pushed_updates()[self._pushed :]
        self._pushed += len(pushed)
        return [line for event in in_order(ready, pushed)
                for line in self._transcript.lines(event)]
