"""The `status` report: database health, per-channel transport state, and what needs a
person. No tokens, user ids or private chat ids in it (a migrated or refused chat's id, which
the person must put in the config, is the one exception, as in `poll`'s lines)."""

from __future__ import annotations

from typing import Any

import apsw

from channels import inbox, messages, store
from channels.decisions import views, workflows
from channels.notifications import views as notification_views
from channels.pi.sessions import pi_channel_id
from channels.telegram import alerts, identity
from channels.telegram.reservations import PROMPT, SETTLE
from state import effects, leases, maintenance
from state.database import Database

__all__ = ["status_report"]


def status_report(db: Database) -> dict[str, Any]:
    """Build the report from one read snapshot."""
    now = db.clock.now_ms()
    with db.snapshot() as conn:
        diag = maintenance.diagnostics(db, full_checks=False)
        channels = [_channel(conn, cid, adapter, profile, now)
                    for cid, adapter, profile in store.all_channels(conn)]
        open_decisions = views.count_open(conn)
        attention = [a for cid, adapter, profile in store.all_channels(conn)
                     if adapter == "telegram" for a in _attention(conn, cid, profile, now)]
        ambiguous = _ambiguous_effects(conn, now)
        notes = _notifications(conn, now)
    return {"now": now, "database": {**diag.to_json(), "open_decisions": open_decisions},
            "channels": channels, "needs_attention": attention, "ambiguous_effects": ambiguous,
            "notifications": notes}


def _notifications(conn: apsw.Connection, now: int) -> list[dict[str, Any]]:
    """The notifications of the runs active in the last day, with each target's delivery
    state; no text, and a Pi session named only by a few hex of its channel's hash."""
    found = []
    for view in notification_views.recent(conn, now):
        n = view.notification
        found.append({
            "run_id": n.run_id, "index": n.notification_index, "type": n.notification_type,
            "created_at": n.created_at, "needs_attention": view.troubled,
            "deliveries": [{"target": _target(d.target), "status": d.status}
                           for d in view.deliveries if d.target != "pi:none"]})
    return found


def _target(target: str) -> str:
    if target.startswith("pi:"):  # never the session id itself
        return f"pi:session:{pi_channel_id(target.removeprefix('pi:'))[3:11]}"
    return target


_AMBIGUOUS_LISTED_MS = 86_400_000  # an ambiguous post is listed for a day: check the chat


def _ambiguous_effects(conn: apsw.Connection, now: int) -> list[dict[str, Any]]:
    """Outcome posts and prompts left ambiguous in the last day (deliveries are listed with
    their decision), with the decision's fingerprint and the profile."""
    rows: list[Any] = conn.execute(
        "SELECT e.effect_type, e.source_resource_id, e.idempotency_key, e.updated_at"
        " FROM effects e WHERE e.status = 'ambiguous' AND e.effect_type IN (?, ?)"
        " AND e.updated_at > ? ORDER BY e.updated_at",
        (PROMPT, SETTLE, now - _AMBIGUOUS_LISTED_MS)).fetchall()
    names = {key: profile for cid, _, profile in store.all_channels(conn)
             for key in (cid, effects.scoped_key(cid))}  # keyed by either
    found = []
    for effect_type, source, key, at in rows:
        decision_id = str(source).removeprefix("decision:")
        profile = names.get(str(key).split(":", 1)[0])
        found.append({"effect_type": str(effect_type), "decision_id": decision_id,
                      "fingerprint": views.fingerprint_of(conn, decision_id),
                      "profile": profile, "since": int(at)})
    return found


def _channel(conn: apsw.Connection, channel_id: str, adapter: str, profile: str,
             now: int) -> dict[str, Any]:
    lease = leases.read(conn, store.channel_resource(channel_id))
    state = "free"
    if lease is not None and lease.owner_type is not None:
        state = "held" if lease.is_live(now) else "expired"
        if state == "held" and lease.owner_id and workflows.owner_process_gone(lease.owner_id):
            state = "dead"  # a killed poller: the next pass takes it over at once
    backlog, total = inbox.inbox_counts(conn, channel_id)
    error = alerts.last_provider_error(conn, channel_id)
    # Session ids stay private: a Pi session is named by a few hex of its channel's hash,
    # enough to tell the lines apart.
    name = f"telegram:{profile}" if adapter == "telegram" else (
        "pi:local" if profile == "local" else f"pi:session:{channel_id[3:11]}")  # never the id
    report: dict[str, Any] = {
        "channel": name,
        "adapter": adapter,
        "profile": profile if adapter == "telegram" else None,
        "lease": {"state": state, "generation": 0 if lease is None else lease.generation},
        "cursor": store.cursor(conn, channel_id, identity.TELEGRAM_CURSOR),
        "inbox": {"backlog": backlog, "total": total},
        "deliveries": messages.delivery_counts(conn, channel_id),
        "last_error": None if error is None else {
            "method": error.get("method"), "code": error.get("errorCode"),
            "description": error.get("description"), "at": error.get("at")},
    }
    if adapter == "telegram":
        last = alerts.last_pass(conn, channel_id)
        report["last_pass"] = None if last is None else {
            "at": last.at, "get_updates": last.updates, "last_ok_at": last.last_ok_at}
        # An error from before the last successful getUpdates is history, not a problem.
        ok_at = None if last is None else last.last_ok_at
        report["error_current"] = error is not None and (
            ok_at is None or int(error.get("at") or 0) > ok_at)
    return report


def _attention(conn: apsw.Connection, channel_id: str, profile: str,
               now: int) -> list[dict[str, Any]]:
    """What the last pass reported about the channel itself, then the decisions needing a
    person (derived now, so a decision resolved since then is no longer listed)."""
    found: list[dict[str, Any]] = []
    last = alerts.last_pass(conn, channel_id)
    if last is not None:
        found += [{"profile": profile, "key": a.key, "kind": a.kind, "since": a.since,
                   "facts": dict(a.facts)} for a in last.alerts.values()
                  if a.kind == "expiry"  # not derivable now
                  or ("decisionId" not in a.facts and "notificationId" not in a.facts)]
    reported = {} if last is None else last.alerts
    for key, (kind, since, facts) in alerts.decision_conditions(conn, channel_id, now).items():
        first = reported.get(key)  # when cron first heard of it, if it did
        # The chats of an ambiguous part stay out (a private chat's id is its user's id):
        # poll's line, in the operator's cron mail, names them.
        shown = {k: v for k, v in facts.items() if k != "chats"}
        found.append({"profile": profile, "key": key, "kind": kind,
                      "since": since if first is None else first.since, "facts": shown})
    return found
