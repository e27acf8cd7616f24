"""Conditions of a Telegram channel that need a person, and when to tell them (cron mail).

A condition is reported on the pass where it starts, again at most once an hour while it
lasts, and once more when it clears. The memory this needs lives in the database: each pass
ends by releasing the channel lease, and that `channel.lease_released` event carries the pass
state as its payload (whether getUpdates worked, the last time it did, the open conditions
with when they were last reported). A healthy pass writes the same small payload every time,
so the blob is shared and a pass costs no row beyond what the lease contract already writes.

Decision conditions (an ambiguous delivery, a refused recipient, a migrated group) are derived
afresh on every pass from the channel's messages and delivery effects of open decisions. A
pass's last Bot API error is a channel event of its own, for `status` to show.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import apsw

from channels import messages, store
from channels.decisions import views
from channels.notifications import records as notification_records
from channels.telegram import config_failures, holds, notifying, reservations
from channels.telegram.ended import PassStatus
from channels.telegram.identity import Channel
from state import blobs, effects, resources
from state.exit_codes import ExitCode
from state.leases import Lease

__all__ = [
    "DEFAULT_ALERT_AFTER_MS", "Alert", "AlertReport", "PassResult", "decision_conditions",
    "last_pass", "last_provider_error", "record_provider_error", "settle",
]


_REPEAT_MS: Final = 3_600_000  # an ongoing condition is mentioned again after an hour
DEFAULT_ALERT_AFTER_MS: Final = 600_000  # unreachable this long before cron hears of it
_RELEASED: Final = "channel.lease_released"
_PROVIDER_ERROR: Final = "channel.provider_error"

_Kind = Literal["token", "conflict", "webhook", "unreachable", "ambiguous", "rejected",
               "migrated", "held", "pass", "failed", "expiry", "config"]

# What each kind exits with (README table): 78 needs a configuration change, 75 may pass.
_EXIT_CODES: Final[Mapping[str, int]] = {
    "token": ExitCode.CONFIG, "rejected": ExitCode.CONFIG, "migrated": ExitCode.CONFIG,
    "conflict": ExitCode.TEMPORARY, "webhook": ExitCode.TEMPORARY,
    "unreachable": ExitCode.TEMPORARY,
    "ambiguous": ExitCode.TEMPORARY, "held": ExitCode.TEMPORARY,
    # A pass that failed ("pass") and a delivery that cannot be made ("failed") carry their
    # own exit code in their facts (exitCode): a token file 77/78, a bug 1.
}


@dataclass(frozen=True, slots=True)
class PassResult:
    """What one pass saw of getUpdates (the poll cycle fills it in)."""

    status: str  # polled | conflict | unauthorized | failed
    updates_ok_at: int | None = None  # the last successful getUpdates of this pass
    updates_error: Mapping[str, Any] | None = None  # set when the last getUpdates failed
    failure: Mapping[str, Any] | None = None  # why the pass failed: description, exitCode
    # Decision id -> why its deadline could not be applied (line, exitCode, cause). Every
    # poll command runs the expiry step before any pass ends: a decision absent here is fine.
    expiry: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Alert:
    """One condition: its kind, its facts (JSON values) and its reporting times."""

    key: str
    kind: str
    since: int
    reported_at: int
    facts: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "since": self.since, "reportedAt": self.reported_at,
                "facts": dict(self.facts)}

    @classmethod
    def from_json(cls, key: str, data: Mapping[str, Any]) -> Alert:
        return cls(key, str(data["kind"]), int(data["since"]), int(data["reportedAt"]),
                   dict(data.get("facts") or {}))

    @property
    def exit_code(self) -> int:
        own = self.facts.get("exitCode")
        if isinstance(own, int) and not isinstance(own, bool):
            return own
        return _EXIT_CODES.get(self.kind, ExitCode.TEMPORARY)


@dataclass(frozen=True, slots=True)
class _PassState:
    """The state a pass left in its release event (what `status` shows, too)."""

    at: int  # when the pass ended
    updates: str  # ok | failed | none (no getUpdates was made)
    last_ok_at: int | None  # the last successful getUpdates, when one is known
    alerts: Mapping[str, Alert]


@dataclass(frozen=True, slots=True)
class AlertReport:
    """What to tell the person after one pass of one channel."""

    profile: str
    now: int
    reported: list[Alert]  # new, or due for the hourly reminder: print now
    ongoing: list[Alert]  # still there, already reported within the hour: quiet
    recovered: list[Alert]  # cleared since the last pass: print once
    state: dict[str, Any]  # the payload of this pass's release event

    @property
    def exit_code(self) -> int:
        return max((a.exit_code for a in [*self.reported, *self.ongoing]), default=ExitCode.OK)


def last_pass(conn: apsw.Connection, channel_id: str) -> _PassState | None:
    """The state the channel's last finished pass recorded, or None before the first."""
    row = conn.execute(
        "SELECT payload_hash, recorded_at FROM events WHERE resource_id = ? AND event_type = ?"
        " ORDER BY resource_revision DESC LIMIT 1",
        (store.channel_resource(channel_id), _RELEASED),
    ).fetchone()
    if row is None:
        return None
    at = int(row[1])
    data: Mapping[str, Any] = {} if row[0] is None else blobs.get_json(conn, bytes(row[0]))
    updates = str(data.get("getUpdates", "ok"))  # an older release without state: assume ok
    last_ok = at if updates == "ok" else data.get("lastOkAt")
    alerts = {k: Alert.from_json(k, v) for k, v in (data.get("alerts") or {}).items()}
    return _PassState(at, updates, None if last_ok is None else int(last_ok), alerts)


def record_provider_error(conn: apsw.Connection, lease: Lease, channel_id: str,
                          error: dict[str, Any], now: int) -> None:
    """Keep a pass's last Bot API error as a channel event (codes and descriptions, no ids)."""
    store.verify(conn, lease, channel_id, now)
    resources.bump_current(conn, store.channel_resource(channel_id), _PROVIDER_ERROR,
                           lease.actor, now, payload=error, lease_generation=lease.generation)


def last_provider_error(conn: apsw.Connection, channel_id: str) -> dict[str, Any] | None:
    """The most recent recorded Bot API error, with its time (None on a Pi channel)."""
    row = conn.execute(
        "SELECT payload_hash, recorded_at FROM events WHERE resource_id = ?"
        " AND event_type = ? ORDER BY resource_revision DESC LIMIT 1",
        (store.channel_resource(channel_id), _PROVIDER_ERROR),
    ).fetchone()
    if row is None or row[0] is None:
        return None
    return {**blobs.get_json(conn, bytes(row[0])), "at": row[1]}


def settle(conn: apsw.Connection, channel: Channel, result: PassResult, now: int,
           alert_after_ms: int = DEFAULT_ALERT_AFTER_MS) -> AlertReport:
    """Compare the conditions of now with those the last pass recorded (read only: the
    caller writes `state` into its release event in the same transaction)."""
    previous = last_pass(conn, channel.channel_id)
    before = {} if previous is None else dict(previous.alerts)
    last_ok = _last_ok(previous, result)
    # Never worked yet: count the outage from when the channel was first polled.
    down_since = last_ok if last_ok is not None else _registered_at(conn, channel.channel_id)
    current = _conditions(conn, channel, result, down_since, now, alert_after_ms)
    reported: list[Alert] = []
    ongoing: list[Alert] = []
    kept: dict[str, Alert] = {}
    for key, (kind, since, facts) in current.items():
        old = before.get(key)
        if old is None or old.kind != kind or now - old.reported_at >= _REPEAT_MS or \
                old.facts.get("cause") != facts.get("cause"):  # a failed pass's new cause
            alert = Alert(key, kind, old.since if old else since, now, facts)
            reported.append(alert)
        else:
            alert = Alert(key, kind, old.since, old.reported_at, facts)
            ongoing.append(alert)
        kept[key] = alert
    recovered: list[Alert] = []
    if (config := config_failures.unreported(conn, channel.channel_id)) is not None:
        # The configuration was unreadable since the last pass; this pass read it.
        recovered.append(Alert("config", "config", config[0], config[0], config[1]))
    for key, old in before.items():
        if key in current:
            continue
        if _cleared(old.kind, result):
            recovered.append(old)
        else:  # not seen now, but not disproved either: it lasts (no false all-clear)
            ongoing.append(old)
            kept[key] = old
    return AlertReport(channel.profile.name, now, reported, ongoing, recovered,
                       _state(result, last_ok, kept))


# Channel conditions that only a success of their own kind clears: a getUpdates that worked
# (not a pass that made none, nor one with a longer --alert-after), a pass that did not fail.
_CLEARED_BY_GET_UPDATES: Final = frozenset({"token", "conflict", "webhook", "unreachable"})


def _cleared(kind: str, result: PassResult) -> bool:
    """Whether this pass proved the condition over."""
    if kind in _CLEARED_BY_GET_UPDATES:
        return result.updates_ok_at is not None
    if kind == "pass":
        return result.failure is None
    return True  # decision conditions are derived afresh from the decision's rows


def _last_ok(previous: _PassState | None, result: PassResult) -> int | None:
    if result.updates_ok_at is not None:
        return result.updates_ok_at
    return None if previous is None else previous.last_ok_at


def _registered_at(conn: apsw.Connection, channel_id: str) -> int:
    created = conn.execute("SELECT created_at FROM channels WHERE channel_id = ?",
                           (channel_id,)).get
    return int(created or 0)


def _state(result: PassResult, last_ok: int | None,
           alerts: Mapping[str, Alert]) -> dict[str, Any]:
    state: dict[str, Any] = {}
    if result.updates_error is None and result.updates_ok_at is not None:
        state = {"getUpdates": "ok"}
    else:
        state = {"getUpdates": "failed" if result.updates_error is not None else "none"}
        if last_ok is not None:
            state["lastOkAt"] = last_ok
    if alerts:
        state["alerts"] = {k: a.to_json() for k, a in alerts.items()}
    return state


_Condition = tuple[str, int, dict[str, Any]]  # (kind, since, facts)


def _conditions(conn: apsw.Connection, channel: Channel, result: PassResult, down_since: int,
                now: int, alert_after_ms: int) -> dict[str, _Condition]:
    found: dict[str, _Condition] = {}
    error = dict(result.updates_error or {})
    facts = {"errorCode": error.get("errorCode"), "description": error.get("description"),
             "outcome": error.get("outcome")}
    if result.failure is not None:
        found["pass"] = ("pass", now, dict(result.failure))
    for decision_id, failed in result.expiry.items():
        found[f"expiry:{decision_id}"] = ("expiry", now, {"decisionId": decision_id,
                                                         **failed})
    if result.status == PassStatus.UNAUTHORIZED:
        found["token"] = ("token", now, facts)
    elif result.status == PassStatus.CONFLICT:
        webhook = "webhook" in str(error.get("description") or "").lower()
        found["conflict"] = ("webhook" if webhook else "conflict", now, facts)
    elif result.updates_error is not None and now - down_since >= alert_after_ms:
        found["unreachable"] = ("unreachable", down_since, facts)
    for key, condition in decision_conditions(conn, channel.channel_id, now).items():
        found[key] = condition
    # A 429 that asked for more than an hour: nothing goes to that chat (or from the bot)
    # until it ends, which may be a surprise to the person waiting for a decision.
    for key, hold in holds.long_holds(conn, channel.channel_id, now).items():
        found[f"held:{key}"] = ("held", hold.since, {**holds.describe_key(key),
                                                     "until": hold.until})
    return found


def decision_conditions(conn: apsw.Connection, channel_id: str,
                        now: int) -> dict[str, _Condition]:
    """Ambiguous deliveries and refused recipients of the channel's open decisions."""
    found: dict[str, _Condition] = {}
    for decision_id, resource_id, status in views.open_deliveries(conn, channel_id):
        base = {"decisionId": decision_id,
                "fingerprint": views.fingerprint_of(conn, decision_id)}
        if status == "ambiguous":
            chats = reservations.ambiguous_chats(conn, channel_id, decision_id, resource_id)
            found[f"ambiguous:{decision_id}"] = ("ambiguous", now, {**base, "chats": chats})
        elif status == "failed" and (why := reservations.delivery_failure(conn, channel_id,
                                                                          resource_id)):
            found[f"failed:{decision_id}"] = ("failed", now, {**base, **why})
        for recipient in reservations.refused_recipients(conn, channel_id, resource_id):
            chat = recipient["chat"]
            if recipient.get("migrateToChatId") is not None:
                found[f"migrated:{decision_id}:{chat}"] = ("migrated", now, {
                    **base, "chat": chat, "newChat": str(recipient["migrateToChatId"])})
            else:
                found[f"rejected:{decision_id}:{chat}"] = ("rejected", now, {
                    **base, "chat": chat, "errorCode": recipient.get("errorCode"),
                    "description": recipient.get("description"),
                    **({"method": "sendDocument"} if recipient.get("method") == "sendDocument"
                       else {})})  # the card's attached file was the part refused
    found.update(_notification_conditions(conn, channel_id, now))
    for decision_id, resource_id in views.open_without_delivery(conn, channel_id):
        if why := reservations.delivery_failure(conn, channel_id, resource_id):
            found[f"failed:{decision_id}"] = ("failed", now, {
                "decisionId": decision_id, "fingerprint": views.fingerprint_of(conn, decision_id),
                **why})
    return found


def _notification_conditions(conn: apsw.Connection, channel_id: str,
                            now: int) -> dict[str, _Condition]:
    """Notifications of the last day whose delivery is ambiguous or was refused, as a
    decision's delivery is (told once, hourly, and on clearing, a day later); one cursor row
    lists them, so a pass reads the same however long the history."""
    found: dict[str, _Condition] = {}
    for entry in notifying.troubles(conn, channel_id, now):
        try:
            effect = effects.get(conn, str(entry["effectId"]))
        except KeyError:
            continue
        payload = effect.payload(conn)
        n = notification_records.get(conn, str(payload.get("notificationId")))
        if n is None:
            continue
        base = {"notificationId": n.notification_id, "runId": n.run_id,
                "index": n.notification_index, "type": n.notification_type}
        since = int(entry["since"])
        if effect.status.value == "ambiguous":
            recipients = [str(r) for r in payload.get("recipients", [])]
            unknown = sorted({p.recipient_index for p in messages.Message(
                notifying.message_of(channel_id, payload)).parts(conn) if p.is_intent})
            found[f"ambiguous:{n.notification_id}"] = ("ambiguous", since, {
                **base, "chats": [recipients[r] for r in unknown if r < len(recipients)]})
        for refused in reservations.refused_chats(conn, effect):
            found[f"rejected:{n.notification_id}:{refused['chat']}"] = ("rejected", since, {
                **base, "chat": refused["chat"], "errorCode": refused.get("errorCode"),
                "description": refused.get("description")})
    return found
