"""What became of a run's notifications, target by target (read side: `show`, `status`).

Each notification has its Pi effect (the row's own: `pi.notify`, cancelled when no Pi session
was to hear of it) and one `telegram.notify` per Telegram channel. A delivery's state is its
effect's: `pending` (waiting: a closed session, the next poll, a coalesced edit), `applied`
(with `superseded` when a newer progress overtook it unsent), `ambiguous` (a send whose
outcome is unknown: never repeated), `rejected` (refused), `cancelled` (not wanted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import apsw

from channels import store
from channels.decisions import runs
from channels.notifications import records
from channels.notifications.producing import PI_NOTIFY, TELEGRAM_NOTIFY
from state import effects

__all__ = ["NotificationView", "for_run", "recent"]


_DAY_MS = 86_400_000
_TROUBLE = ("ambiguous", "rejected")  # what needs a person


@dataclass(frozen=True, slots=True)
class _Delivery:
    """One target's delivery of a notification."""

    target: str  # `pi:<session>` (`pi:none`: no session), or `telegram:<profile>`
    effect_type: str
    status: str  # the effect's status, or `superseded`
    attempts: int
    settled_at: int | None
    receipt: str | None  # the Pi entry id, when Pi has it

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "effect": self.effect_type, "status": self.status,
                "attempts": self.attempts, "settled_at": self.settled_at,
                "receipt": self.receipt}


@dataclass(frozen=True, slots=True)
class NotificationView:
    """A notification with its deliveries."""

    notification: records.Notification
    deliveries: tuple[_Delivery, ...]

    @property
    def troubled(self) -> bool:
        return any(d.status in _TROUBLE for d in self.deliveries)

    def to_json(self) -> dict[str, Any]:
        n = self.notification
        return {"notification_id": n.notification_id, "run_id": n.run_id,
                "index": n.notification_index, "type": n.notification_type,
                "target_session_id": n.target_session_id or None, "text": n.text,
                "created_at": n.created_at,
                "deliveries": [d.to_json() for d in self.deliveries]}


def _delivery(conn: apsw.Connection, effect: effects.Effect,
              names: dict[str, str]) -> _Delivery:
    payload = effect.payload(conn)
    result = effect.result(conn) or {}
    status = "superseded" if isinstance(result, dict) and result.get("superseded") \
        else effect.status.value
    if effect.effect_type == PI_NOTIFY:
        target = f"pi:{payload.get('targetSessionId') or 'none'}"
    else:
        channel_id = str(payload.get("channelId"))
        target = names.get(channel_id, channel_id)
    return _Delivery(target, effect.effect_type, status, effect.attempt_count, effect.settled_at,
                    effect.external_ref if effect.effect_type == PI_NOTIFY else None)


def for_run(conn: apsw.Connection, run_id: str) -> list[NotificationView]:
    """A run's notifications, oldest first, each with its deliveries."""
    source = runs.run_resource(run_id)
    mine: dict[str, list[_Delivery]] = {}
    names = {cid: f"telegram:{profile}" for cid, adapter, profile in store.all_channels(conn)
             if adapter == "telegram"}
    for effect_type in (PI_NOTIFY, TELEGRAM_NOTIFY):
        for effect in effects.list_for_source(conn, source, effect_type):
            key = effect.idempotency_key.rsplit(":", 1)[-1]
            mine.setdefault(key, []).append(_delivery(conn, effect, names))
    return [NotificationView(n, tuple(mine.get(n.notification_id, ())))
            for n in records.for_run(conn, run_id)]


def recent(conn: apsw.Connection, now: int, within_ms: int = _DAY_MS) -> list[NotificationView]:
    """The notifications of the runs active in the last day (newest run first)."""
    return [view for run_id in runs.updated_since(conn, now - within_ms)
            for view in for_run(conn, run_id)]
