"""Notifications in a Pi session: the session's bridge applies the `pi.notify` effects of the
notifications targeted at its session, under its channel lease.

Each delivery is an effect attempt begun before the line goes out (the write-ahead intent:
the effect's own lease and status decide, so at most one path has an attempt open at a
time) and finished with the Pi entry id the extension reports (the terminal receipt). The
extension looks for the notification's id in the session's branch before it shows one, so a
line offered again after an attempt was abandoned (a bridge killed between the show and the
receipt, a /reload, a lease taken over) is never shown twice: the retry adopts the entry that
is there and its receipt says so (`adopted`). The rows belong to `channels.notifications`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import apsw

from channels import store
from channels.decisions import workflows
from channels.notifications import records
from channels.notifications.records import Notification
from state import effects, leases
from state.clock import Entropy
from state.database import Database
from state.effects import Attempt, EffectStatus
from state.errors import LeaseHeld, WriteRejected
from state.leases import Lease, OwnerType
from state.resources import Actor, ActorType

__all__ = ["SessionNotes", "note_receipt", "pending_count"]


@dataclass(frozen=True, slots=True)
class _PiNote:
    """A notification to show in the session, with what its line says."""

    notification: Notification
    title: str | None
    context: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The wire form the session is sent (its `notify` line)."""
        n = self.notification
        return {"notification_id": n.notification_id, "kind": n.notification_type,
                "title": self.title, "text": n.text, "run_id": n.run_id, "context": self.context}


def _due_notes(conn: apsw.Connection, session_id: str, now: int) -> list[_PiNote]:
    """The session's notifications waiting to be shown, oldest first."""
    found = []
    for n in records.for_session(conn, session_id, ("pending",), now):
        payload = effects.get(conn, n.effect_id).payload(conn)
        title = payload.get("title")
        found.append(_PiNote(n, str(title) if title else None, dict(payload.get("context") or {})))
    return found


def pending_count(conn: apsw.Connection, session_id: str) -> int:
    """How many notifications wait for this session (shown or not, no receipt yet)."""
    return len(records.for_session(conn, session_id, ("pending", "applying")))


def _begin_note(conn: apsw.Connection, lease: Lease, channel_id: str, note: _PiNote,
               owner_id: str, now: int, entropy: Entropy) -> Attempt:
    """The intent, before the line goes out: the channel's owner opens an attempt on the
    notification's effect (WriteRejected or LeaseHeld when another path has it)."""
    store.verify(conn, lease, channel_id, now)
    effect = effects.get(conn, note.notification.effect_id)
    return effect.begin_attempt(conn, OwnerType.CHANNEL, owner_id, now, entropy)


def _renew_note(conn: apsw.Connection, attempt: Attempt, now: int) -> Attempt:
    """Keep an attempt alive while the extension waits for Pi to be idle."""
    return attempt.renew(conn, now)


def _confirm_note(conn: apsw.Connection, lease: Lease, channel_id: str, session_id: str,
                 attempt: Attempt | None, notification_id: str, entry_id: str, adopted: bool,
                 now: int) -> bool:
    """Record the Pi entry id as the receipt of this bridge's attempt. False when the effect
    was settled already (a repeated receipt changes nothing); KeyError when the notification
    is not this session's, or this bridge has no attempt open for it."""
    store.verify(conn, lease, channel_id, now)
    found = records.get(conn, notification_id)
    if found is None or found.target_session_id != session_id:
        raise KeyError(notification_id)
    effect = effects.get(conn, found.effect_id)
    if effect.status.settled:
        return False
    if attempt is None or attempt.effect.effect_id != effect.effect_id:
        raise KeyError(notification_id)
    attempt.finish(conn, effects.AttemptOutcome.APPLIED, now,
                   result={"entryId": entry_id, "adopted": adopted},
                   external_ref=entry_id)
    return True


def _reopenable(conn: apsw.Connection, session_id: str, owner_id: str, now: int,
               owner_gone: Callable[[str], bool]) -> list[str]:
    """The session's open attempts that no live bridge will finish: their lease ran out, or
    their owner's process is gone (never this owner's own)."""
    found = []
    for n in records.for_session(conn, session_id, ("applying",)):
        held = leases.read(conn, effects.get(conn, n.effect_id).resource_id)
        if held is not None and held.is_live(now) and (
                held.owner_id == owner_id or not held.owner_id or not owner_gone(held.owner_id)):
            continue  # its bridge still lives: it finishes the attempt itself
        found.append(n.notification_id)
    return found


def _recover_notes(conn: apsw.Connection, lease: Lease, channel_id: str, session_id: str,
                  now: int, owner_gone: Callable[[str], bool]) -> list[str]:
    """The owner of the session's channel reopens the attempts no live bridge will finish
    (`_reopenable`): they are closed as interrupted and the notifications are due again.
    Offering one again is not blind: the extension finds an entry that arrived in the branch
    and reports it (the receipt then says `adopted`), so it is shown at most once. Returns the
    notification ids reopened."""
    store.verify(conn, lease, channel_id, now)
    actor = Actor(ActorType.CHANNEL, lease.owner_id)
    reopened = _reopenable(conn, session_id, lease.owner_id, now, owner_gone)
    for notification_id in reopened:
        found = records.get(conn, notification_id)
        assert found is not None
        effect = effects.get(conn, found.effect_id)
        # its process is gone: a lease that still looks live is freed
        effect.interrupt(conn, actor, now, provably_unsent=True, owner_gone=True)
    return reopened


def note_receipt(conn: apsw.Connection, notification_id: str) -> dict[str, Any] | None:
    """{entryId, adopted} of a notification shown in its session, once its effect is applied."""
    found = records.get(conn, notification_id)
    if found is None:
        return None
    effect = effects.get(conn, found.effect_id)
    if effect.status is not EffectStatus.APPLIED:
        return None
    result = effect.result(conn)
    return dict(result) if isinstance(result, dict) else None


def _unsent(conn: apsw.Connection, attempt: Attempt, now: int) -> None:
    attempt.finish(conn, effects.AttemptOutcome.REJECTED, now,
                   error={"description": "the extension's pipe is closed"}, retry_at=now)


class _Owner(Protocol):
    """The owner of the session's channel (`channels.pi.owner.SessionOwner`, which imports
    this module through `deliveries`: its shape only, so no import circle)."""

    @property
    def lease(self) -> Lease: ...
    @property
    def channel_id(self) -> str: ...
    @property
    def session_id(self) -> str: ...


@dataclass
class SessionNotes:
    """The notifications one bridge shows in its session: the attempts it has open (a line
    sent, no receipt yet), each begun before its line goes out."""

    db: Database
    owner_id: str
    attempts: dict[str, Attempt] = field(default_factory=dict)  # notification id -> attempt

    def _now(self) -> int:
        return self.db.clock.now_ms()

    def recover(self, owner: _Owner) -> None:
        """On claiming the session's channel: reopen what an earlier bridge left applying."""
        self.attempts.clear()
        self._reopen(owner)

    def forget(self) -> None:
        """The channel's lease is lost: the next owner recovers the attempts left open."""
        self.attempts.clear()

    def _reopen(self, owner: _Owner) -> None:
        # A read first: the write happens only when an attempt can be reopened.
        gone = workflows.owner_process_gone
        if any(i not in self.attempts for i in self.db.read(lambda c: _reopenable(
                c, owner.session_id, self.owner_id, self._now(), gone))):
            self.db.write(lambda c: _recover_notes(
                c, owner.lease, owner.channel_id, owner.session_id, self._now(), gone))

    def offer(self, owner: _Owner, send: Callable[[_PiNote], bool]) -> None:
        """Send each due notification once, its attempt written first. An attempt this
        bridge does not know of (left by a bridge that lost the lease while it lived) is
        reopened once its lease has run out or its process is gone."""
        self._reopen(owner)
        due = self.db.read(lambda c: _due_notes(c, owner.session_id, self._now()))
        for note in due:
            notification_id = note.notification.notification_id
            if notification_id in self.attempts:
                continue
            try:
                attempt = self.db.write(partial(
                    _begin_note, lease=owner.lease, channel_id=owner.channel_id, note=note,
                    owner_id=self.owner_id, now=self._now(), entropy=self.db.entropy))
            except (WriteRejected, LeaseHeld):
                continue  # another path has it: the database decided, this one stays out
            self.attempts[notification_id] = attempt
            if not send(note):
                # The pipe is closed: the line provably did not go out; due again.
                self.attempts.pop(notification_id)
                self.db.write(partial(_unsent, attempt=attempt, now=self._now()))
                return

    def confirm(self, owner: _Owner, notification_id: str, entry_id: str,
                adopted: bool) -> None:
        """The receipt: the Pi entry that shows the notification (`_confirm_note`; KeyError
        when it is not a notification this bridge offered to this session)."""
        attempt = self.attempts.get(notification_id)
        self.db.write(lambda c: _confirm_note(
            c, owner.lease, owner.channel_id, owner.session_id, attempt, notification_id,
            entry_id, adopted, self._now()))
        self.attempts.pop(notification_id, None)

    def renew(self) -> None:
        """Renew the attempts whose line waits in the extension (Pi busy with a turn)."""
        for notification_id, attempt in list(self.attempts.items()):
            if not attempt.lease.needs_renewal(self._now()):
                continue
            self.attempts[notification_id] = self.db.write(
                partial(_renew_note, attempt=attempt, now=self._now()))
