"""`demo --press` and `demo --reply`: act as the person in a `demo --serve` chat.

Each pushes one update into the running fake (through its `/_control/` interface), as
Telegram would deliver it; the next `poll` collects it. Without `--decision` they act on the
newest message (with buttons, or the newest ForceReply prompt); with it, on that decision's
message, found by the callback tokens its keyboard carries (read from the database in this
HOME), so any layout of the card works.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from adapters.cli.errors import UsageError
from adapters.telegram.fake import RecordedRequest, RemoteFakeBotApi
from adapters.telegram.fake.transcript import shorten
from channels.decisions import records, views, workflows
from channels.telegram.buttons import TOKEN_RE, callback_token
from state.database import Database
from state.errors import DatabaseMissing
from state.exit_codes import ExitCode

__all__ = ["press", "reply"]


# The person the demo fixtures act as (a private chat's user id is its chat id).
_PERSON: Final = {"is_bot": False, "first_name": "Ada", "username": "ada_ops",
                  "language_code": "en"}


def press(url: str, label: str, user: int | None, decision: str | None = None) -> int:
    """Press a button of the newest message that shows buttons (or of `decision`'s)."""
    fake = _remote(url)
    # A settled card keeps its buttons, marked and inert: only live ones can be pressed.
    shown = [m for m in fake.keyboards()
             if any(TOKEN_RE.fullmatch(t) for t in _tokens(m["inline_keyboard"]))]
    target = None if decision is None else _Decision(decision)
    if target is not None:
        shown = [m for m in shown if target.tokens & _tokens(m["inline_keyboard"])]
        if not shown:
            delivered = any(target.tokens & _tokens(_keyboard(r)) for r in _sent(fake))
            raise UsageError(
                f"{target.name}'s message shows no buttons any more (it was decided: run"
                f" piw-channels show {target.fingerprint})" if delivered else
                f"{target.name} was not delivered to the demo Bot API yet; run: piw-channels"
                " poll")
    if not shown:
        raise UsageError("no message on the demo Bot API shows buttons to answer (a decided"
                         " one's are marked and inert); run: piw-channels ask ..., then"
                         " piw-channels poll")
    message = shown[-1]
    buttons = [b for row in message["inline_keyboard"] for b in row]
    chosen = [b for i, b in enumerate(buttons, 1)
              if label.casefold() in (str(b["text"]).casefold(), str(i))]
    if not chosen:
        names = ", ".join(repr(b["text"]) for b in buttons)
        where = "the newest message" if target is None else f"{target.name}'s message"
        raise UsageError(f"no button {label!r} on {where} (buttons: {names})")
    chat = int(message["chat_id"])
    fake.push_fixture("callback_press.json", {
        "user_id": chat if user is None else user, "chat_id": chat,
        "message_id": message["message_id"], "message_text": message["text"],
        "callback_data": chosen[0]["callback_data"]})
    print(f"pressed {chosen[0]['text']!r}; run piw-channels poll to collect it")
    return ExitCode.OK


def reply(url: str, text: str, user: int | None, decision: str | None = None) -> int:
    """Reply with `text` to the newest ForceReply prompt (or to `decision`'s message)."""
    if not text.strip():
        raise UsageError("--reply needs some text (Telegram sends no empty message)")
    fake = _remote(url)
    sent = _sent(fake)
    if decision is None:
        prompts = [r for r in sent if _forces_reply(r)]
        if not prompts:
            raise UsageError(
                "no prompt on the demo Bot API waits for a reply (a choice that asks for"
                " text sends one when pressed); to answer a decision by text, reply to its"
                " message: piw-channels demo --reply TEXT --decision ID --api-base-url URL")
        replied = prompts[-1]
    else:
        target = _Decision(decision)
        cards = [r for r in sent if target.tokens & _tokens(_keyboard(r))]
        if not cards:
            raise UsageError(f"{target.name} was not delivered to the demo Bot API yet; run:"
                             " piw-channels poll")
        replied = cards[-1]  # the part that carries the keyboard: the card's last
    message: dict[str, Any] = dict(replied.result)
    chat = int(message["chat"]["id"])
    person = {"id": chat if user is None else user, **_PERSON}
    update: dict[str, Any] = {"from": person, "chat": message["chat"],
                              "date": int(time.time())}
    if "message_thread_id" in message:  # a forum topic: the reply stays in it
        update |= {"message_thread_id": message["message_thread_id"],
                   "is_topic_message": True}
    update |= {"reply_to_message": message, "text": text}
    fake.push_update({"message": update})
    print(f"replied {shorten(text)!r} to “{shorten(str(message.get('text', '')))}”; run"
          " piw-channels poll to collect it")
    return ExitCode.OK


class _Decision:
    """The decision `--decision` names, with the callback tokens of its buttons."""

    def __init__(self, text: str) -> None:
        try:
            db = Database.open_reader()
        except DatabaseMissing:
            raise UsageError("--decision: there is no database in this HOME yet (run the"
                             " rehearsal's ask and poll in the same HOME)") from None
        with db:
            decision_id = workflows.resolve_id(db, text)
            request = db.read(lambda c: records.load(c, decision_id).request)
            self.fingerprint = db.read(lambda c: views.fingerprint_of(c, decision_id))
        self.name = f"Decision {self.fingerprint}"
        self.tokens = {callback_token(decision_id, request.request_digest, choice)
                       for choice in request.choices}


def _remote(url: str) -> RemoteFakeBotApi:
    fake = RemoteFakeBotApi(url)
    try:
        fake.pushed_updates()
    except OSError as exc:
        raise UsageError(f"no demo Bot API answers at {url} ({exc}); start one with:"
                         " piw-channels demo --serve") from None
    return fake


def _sent(fake: RemoteFakeBotApi) -> list[RecordedRequest]:
    """The messages the bot sent that reached the chat (their Message is known), oldest first."""
    return [r for r in fake.requests("sendMessage")
            if isinstance(r.result, dict) and "message_id" in r.result]


def _markup(request: RecordedRequest) -> Mapping[str, Any]:
    markup = request.params.get("reply_markup")
    return markup if isinstance(markup, dict) else {}


def _keyboard(request: RecordedRequest) -> list[Any]:
    rows = _markup(request).get("inline_keyboard")
    return rows if isinstance(rows, list) else []


def _forces_reply(request: RecordedRequest) -> bool:
    return _markup(request).get("force_reply") in (True, "true", "True")


def _tokens(keyboard: list[Any]) -> set[str]:
    return {str(b.get("callback_data")) for row in keyboard if isinstance(row, list)
            for b in row if isinstance(b, dict) and b.get("callback_data")}
