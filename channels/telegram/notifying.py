"""Notifications on Telegram: one status card per run, edited in place, and the result.

A `progress` notification shows on the run's status card in each chat: the first one sends the
card (silently), the later ones edit it. Edits are coalesced: a card is touched at most once
every EDIT_EVERY_MS (a newer progress waits for its slot, without an attempt row), and a
progress that a newer one of the same run overtook is settled as superseded, unsent: the
latest text wins. A `final` notification is a new message that notifies, replying to the card;
the progress still pending before it goes first, at once (the card shows the last progress).

The rules of every send hold: the card's and the result's parts are intents before they are
sent, never re-sent once they may have arrived; an edit needs no intent (editing a card twice
to the same text is harmless, "message is not modified" counts as done), so an interrupted
edit is simply tried again. No transaction is held across a request.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import apsw

from channels import messages, store
from channels.decisions import runs
from channels.decisions.deadline import clock_time
from channels.messages import Purpose
from channels.notifications import records
from channels.notifications.producing import TELEGRAM_NOTIFY
from channels.telegram.identity import Channel
from channels.telegram.settle_rules import maybe_acted, token_rejected
from channels.telegram.transport import BotApi, CallOutcome, ProviderResult, describe
from state import effects
from state.database import Database
from state.effects import Attempt, AttemptOutcome, Effect
from state.leases import Lease

if TYPE_CHECKING:  # the card's rendering is imported where a notification is sent: a pass
    # that sends none does not load it
    from channels.telegram.card import CardPart

__all__ = ["NOTIFY", "any_due", "apply", "interrupted", "message_of", "ready", "troubles"]


class _Outbound(Protocol):
    """What a notification's sends need of the channel's outbound (`outbound.Outbound`)."""

    db: Database
    api: BotApi
    channel: Channel
    errors: list[dict[str, Any]]
    unauthorized: bool

    @property
    def deadline(self) -> Callable[[], float]: ...  # epoch seconds by which calls must end

NOTIFY = TELEGRAM_NOTIFY
_EDIT_EVERY_MS = 10_000  # a status card is edited at most this often
_NOT_SENT_BACKOFF_MS = 5_000
# The channel's notification deliveries that need a person (ambiguous, refused) in the last
# day, as a cursor: the alerts read one row, however long the history.
_TROUBLE_CURSOR = "notification_troubles"
_TROUBLE_KEPT_MS = 86_400_000
_MAX_TROUBLES = 100


def troubles(conn: apsw.Connection, channel_id: str, now: int) -> list[dict[str, Any]]:
    """{effectId, since} of the channel's troubled notification deliveries of the last day."""
    raw = store.cursor(conn, channel_id, _TROUBLE_CURSOR)
    listed = json.loads(raw) if raw else []
    return [e for e in listed if isinstance(e, dict) and int(e.get("since", 0)) >= now -
            _TROUBLE_KEPT_MS]


def _note_trouble(conn: apsw.Connection, lease: Lease, channel_id: str, effect_id: str,
                 now: int, *, channel_lease: bool = False) -> None:
    """Remember a delivery that needs a person (under the attempt's lease, or the channel's
    when recovery finds it)."""
    kept = [e for e in troubles(conn, channel_id, now) if e.get("effectId") != effect_id]
    value = json.dumps([*kept, {"effectId": effect_id, "since": now}][-_MAX_TROUBLES:],
                       separators=(",", ":"))
    store.set_cursor(conn, lease, channel_id, _TROUBLE_CURSOR, value, now,
                     by_effect=not channel_lease)


def interrupted(conn: apsw.Connection, lease: Lease, channel_id: str, effect: Effect,
                maybe_sent: bool, now: int) -> None:
    """Recovery found a notification's attempt abandoned with a send that may have arrived."""
    if effect.effect_type == NOTIFY and maybe_sent:
        _note_trouble(conn, lease, channel_id, effect.effect_id, now, channel_lease=True)


def _status_card_id(channel_id: str, run_id: str) -> str:
    """The run's status card on a channel (one message per chat, recipient by recipient)."""
    return messages.message_id_for(channel_id, Purpose.SETTLEMENT, "notification-status", run_id)


def _result_message_id(channel_id: str, notification_id: str) -> str:
    """The message a final notification sends."""
    return messages.message_id_for(channel_id, Purpose.SETTLEMENT, "notification", notification_id)


def message_of(channel_id: str, payload: dict[str, Any]) -> str:
    """The message a telegram.notify effect writes (to look for intents after a crash)."""
    if payload.get("type") == "final":
        return _result_message_id(channel_id, str(payload["notificationId"]))
    return _status_card_id(channel_id, str(payload["runId"]))


def _render(payload: dict[str, Any], text: str, now: int) -> list[CardPart]:
    """The card (one part, shortened with "…") or the result (split into marked parts)."""
    from channels.telegram.card import note_parts

    final = payload.get("type") == "final"
    title = payload.get("title")
    head = "Finished" if final else "In progress"
    context = payload.get("context") or {}
    line = " · ".join(str(context[k]) for k in ("project", "session", "host") if context.get(k))
    at = clock_time(int(payload["createdAt"]), now)
    tail = [(line, "italic"), (f"Finished at {at}" if final else f"Updated {at}", None),
            (f"Run {payload['runId']}", "code")]
    return note_parts(f"{head}: {title}" if title else head, text, tail, silent=not final,
                      single=not final)


# -- what goes when (reads) ---------------------------------------------------------------------


def _mine(conn: apsw.Connection, channel_id: str, run_id: str) -> list[Effect]:
    """This channel's notification effects of one run, oldest first."""
    return [e for e in effects.list_for_source(conn, runs.run_resource(run_id), NOTIFY)
            if e.idempotency_key.startswith(channel_id + ":")]


def _order(conn: apsw.Connection, run_id: str) -> list[records.Notification]:
    return records.for_run(conn, run_id)


def _superseded_by(conn: apsw.Connection, payload: dict[str, Any]) -> str | None:
    """The newer progress of the same run that overtook this one (None: it is the latest)."""
    if payload.get("type") != "progress":
        return None
    listed = _order(conn, str(payload["runId"]))
    ids = [n.notification_id for n in listed]
    mine = str(payload["notificationId"])
    later = [n for n in listed[ids.index(mine) + 1:] if n.notification_type == "progress"] \
        if mine in ids else []
    return later[-1].notification_id if later else None


def _earlier_progress(conn: apsw.Connection, channel_id: str, effect: Effect) -> list[Effect]:
    """For a final: this run's progress effects on the channel still pending before it (they
    go first, so that the result replies to a card that shows the last progress)."""
    payload = effect.payload(conn)
    if payload.get("type") != "final":
        return []
    found = []
    for other in _mine(conn, channel_id, str(payload["runId"])):
        if other.effect_id == effect.effect_id:
            break
        if other.status is effects.EffectStatus.PENDING and \
                other.payload(conn).get("type") == "progress":
            found.append(other)
    return found


def any_due(conn: apsw.Connection, channel_id: str, now: int) -> bool:
    """Whether a notification effect of this channel is due (a `--for` window's wakeup)."""
    return bool(effects.list_due(conn, (NOTIFY,), now, scope=channel_id))


def _due_at(conn: apsw.Connection, channel_id: str, effect: Effect, now: int) -> int | None:
    """When a progress may touch its card (None: now): EDIT_EVERY_MS after the card was last
    sent or edited, unless a final of the run waits (then at once) or it is overtaken (it is
    settled at once, unsent)."""
    payload = effect.payload(conn)
    if payload.get("type") != "progress" or _superseded_by(conn, payload) is not None:
        return None
    run_id = str(payload["runId"])
    if any(n.is_final for n in _order(conn, run_id)):
        return None
    touched = [e.settled_at for e in _mine(conn, channel_id, run_id)
               if e.status is effects.EffectStatus.APPLIED and e.settled_at is not None
               and (e.result(conn) or {}).get("touched")]
    last = max(touched, default=None)
    if last is None or now - last >= _EDIT_EVERY_MS:
        return None
    return last + _EDIT_EVERY_MS


# -- applying -----------------------------------------------------------------------------------


async def ready(out: _Outbound, effect: Effect,
                apply_now: Callable[[Effect], Awaitable[None]]) -> bool:
    """A result goes after the progress still pending before it (applied here, at once); a
    progress waits for its card's next edit slot (deferred, no attempt row): False when the
    effect must wait."""
    channel_id = out.channel.channel_id
    for earlier in out.db.read(lambda c: _earlier_progress(c, channel_id, effect)):
        await apply_now(earlier)
    now = out.db.clock.now_ms()
    at = out.db.read(lambda c: _due_at(c, channel_id, effect, now))
    if at is not None:
        out.db.write(lambda c: effect.defer(c, at, now))
    return at is None


async def apply(out: _Outbound, attempt: Attempt) -> None:
    """Apply one telegram.notify effect whose attempt has begun."""
    payload = out.db.read(lambda c: attempt.effect.payload(c))
    newer = out.db.read(lambda c: _superseded_by(c, payload))
    if newer is not None:
        _finish(out, attempt, AttemptOutcome.APPLIED, result={"superseded": newer})
        return
    found = out.db.read(lambda c: records.get(c, str(payload["notificationId"])))
    if found is None:
        _finish(out, attempt, AttemptOutcome.REJECTED,
                error={"description": "notification not found"})
        return
    parts = _render(payload, found.text, out.db.clock.now_ms())
    message_id = message_of(out.channel.channel_id, payload)
    message = out.db.write(lambda c: messages.ensure_message(
        c, message_id, out.channel.channel_id, None, Purpose.SETTLEMENT, parts[0].text,
        out.db.clock.now_ms()))
    sender = _Sender(out, attempt, message, payload)
    if payload.get("type") == "final":
        await sender.result(parts)
    else:
        await sender.card(parts[0])


def _finish(out: _Outbound, attempt: Attempt, outcome: effects.AttemptOutcome, *,
            result: Any = None, error: Any = None, retry_in_ms: int | None = None) -> None:
    now = out.db.clock.now_ms()
    out.db.write(lambda c: attempt.finish(
        c, outcome, now, result=result, error=error,
        retry_at=None if retry_in_ms is None else now + retry_in_ms))


class _Sender:
    """The sends of one attempt, recipient by recipient."""

    def __init__(self, out: _Outbound, attempt: Attempt, message: messages.Message,
                 payload: dict[str, Any]) -> None:
        self.out, self.attempt, self.message = out, attempt, message
        self.recipients = [str(r) for r in payload["recipients"]]
        self.run_id = str(payload["runId"])

    def _now(self) -> int:
        return self.out.db.clock.now_ms()

    def _until(self) -> float:
        return min(self.out.deadline(), self.attempt.lease.expires_at / 1000 - 5.0)

    def _intent(self, r: int, index: int, text: str) -> None:
        def command(c: Any) -> Attempt:
            renewed = self.attempt.renew(c, self._now())
            self.message.write_intent(c, r, index, text, self._now())
            return renewed
        self.attempt = self.out.db.write(command)

    def _sent(self, r: int, index: int, chat: str, res: ProviderResult) -> str:
        """Record one send: confirmed, ambiguous (the intent stays), or the intent removed
        (not_sent and rate_limited end the attempt, to be tried again; rejected goes on)."""
        if res.outcome == CallOutcome.OK and res.message_id is not None:
            ref = str(res.message_id)
            self.out.db.write(lambda c: self.message.confirm(c, r, index, chat, ref))
            return "confirmed"
        self.out.errors.append({"method": "sendMessage", **describe(res)})
        if maybe_acted(res):
            return "ambiguous"
        self.out.db.write(lambda c: self.message.unsend(c, r, index))
        return self._retry(res) or "rejected"

    def _retry(self, res: ProviderResult) -> str | None:
        """A provably unsent try, or a 429: the attempt ends, due again later."""
        if res.outcome == CallOutcome.NOT_SENT or token_rejected(res):
            self.out.unauthorized = self.out.unauthorized or token_rejected(res)
            _finish(self.out, self.attempt, AttemptOutcome.REJECTED, error=describe(res),
                    retry_in_ms=0 if token_rejected(res) else _NOT_SENT_BACKOFF_MS)
            return "not_sent"
        if res.is_rate_limited:
            _finish(self.out, self.attempt, AttemptOutcome.REJECTED, error=describe(res),
                    retry_in_ms=int(float(res.retry_after or 1) * 1000))
            return "not_sent"
        return None

    def _close(self, report: list[dict[str, Any]], *, touched: bool) -> None:
        """Settle the attempt from each recipient's status."""
        statuses = {entry["status"] for entry in report}
        unknown = "ambiguous" in statuses
        done = statuses & {"confirmed", "edited", "card_unknown", "muted"}
        status = messages.MessageStatus("ambiguous" if unknown else
                                        "confirmed" if done else "failed")
        outcome = effects.AttemptOutcome("ambiguous" if unknown else
                                         "applied" if done or not report else "rejected")

        refused = any(entry["status"] == "rejected" for entry in report)

        def command(c: Any) -> None:
            now = self._now()
            self.message.set_status(c, status, now)
            if unknown or refused:  # an alert, for a day (before the lease is cleared)
                _note_trouble(c, self.attempt.lease, self.out.channel.channel_id,
                             self.attempt.effect.effect_id, now)
            self.attempt.finish(c, outcome, now,
                                result={"recipients": report, "touched": touched},
                                error={"recipients": report} if unknown else None)
        self.out.db.write(command)

    async def card(self, part: CardPart) -> None:
        """Send the card to each chat that has none; edit it where it is."""
        from channels.telegram.muting import muted_chats

        report: list[dict[str, Any]] = []
        rows = self.out.db.read(self.message.placed_parts)
        channel_id = self.out.channel.channel_id
        muted = self.out.db.read(lambda c: muted_chats(c, channel_id, self._now()))
        for r, chat in enumerate(self.recipients):
            row = rows.get((r, 0))
            if chat in muted:  # `/mute` in that chat: no card, sent or edited, for now
                report.append({"index": r, "status": "muted"})
                continue
            if row is not None and row.is_intent:
                report.append({"index": r, "status": "card_unknown"})  # never sent twice
                continue
            if row is None:
                self._intent(r, 0, part.text)
                res = await self.out.api.send_message(
                    chat, part.text, entities=part.entities, disable_notification=True,
                    deadline=self._until())
                status = self._sent(r, 0, chat, res)
            else:
                res = await self.out.api.edit_message_text(
                    chat, int(str(row.message_ref)), part.text, entities=part.entities,
                    deadline=self._until())
                status = self._edited(res)
            if status == "not_sent":
                return  # the attempt is recorded: due again
            report.append({"index": r, "status": status, **(
                {} if status in ("confirmed", "edited") else describe(res))})
        self._close(report, touched=True)

    def _edited(self, res: ProviderResult) -> str:
        if res.outcome == CallOutcome.OK or res.is_message_not_modified \
                or res.is_message_to_edit_not_found:
            return "edited"  # the same text again, or a card the person deleted: done
        self.out.errors.append({"method": "editMessageText", **describe(res)})
        if maybe_acted(res):  # an edit is idempotent: done again later, never a duplicate
            _finish(self.out, self.attempt, AttemptOutcome.REJECTED, error=describe(res),
                    retry_in_ms=_NOT_SENT_BACKOFF_MS)
            return "not_sent"
        return self._retry(res) or "rejected"

    async def result(self, parts: list[CardPart]) -> None:
        """The final result to each chat, its first part replying to the chat's card."""
        cards = {r: row.message_ref for (r, index), row in
                 self.out.db.read(messages.Message(_status_card_id(
                     self.out.channel.channel_id, self.run_id)).placed_parts).items()
                 if index == 0 and row.message_ref is not None}
        rows = self.out.db.read(self.message.placed_parts)
        report: list[dict[str, Any]] = []
        for r, chat in enumerate(self.recipients):
            status = "confirmed"
            for index, part in enumerate(parts):
                row = rows.get((r, index))
                if row is not None and not row.is_intent:
                    continue  # confirmed earlier: never sent again
                if row is not None:
                    status = "ambiguous"
                    break
                self._intent(r, index, part.text)
                card = cards.get(r)
                res = await self.out.api.send_message(
                    chat, part.text, entities=part.entities, disable_notification=part.silent,
                    reply_to=int(card) if card is not None and index == 0 else None,
                    deadline=self._until())
                status = self._sent(r, index, chat, res)
                if status != "confirmed":
                    break
            if status == "not_sent":
                return
            report.append({"index": r, "status": status})
        self._close(report, touched=False)
