"""The `status` report: database health and per-channel transport state, no private ids."""

from __future__ import annotations

from typing import Any

import apsw

from channels import inbox, messages, store
from channels.decisions import views
from channels.telegram import identity
from state import leases, maintenance
from state.database import Database


def status_report(db: Database) -> dict[str, Any]:
    """Build the report from one read snapshot."""
    with db.snapshot() as conn:
        diag = maintenance.diagnostics(db, full_checks=False)
        channels = [_channel(conn, cid, adapter, profile, db.clock.now_ms())
                    for cid, adapter, profile in store.all_channels(conn)]
        open_decisions = views.count_open(conn)
    return {"database": {**diag.to_json(), "open_decisions": open_decisions},
            "channels": channels}


def _channel(conn: apsw.Connection, channel_id: str, adapter: str, profile: str,
             now: int) -> dict[str, Any]:
    lease = leases.read(conn, store.channel_resource(channel_id))
    state = "free"
    if lease is not None and lease.owner_type is not None:
        state = "held" if lease.is_live(now) else "expired"
    backlog, total = inbox.inbox_counts(conn, channel_id)
    error = store.last_provider_error(conn, channel_id)
    # Session ids stay private: a Pi session is named by a few hex of its channel's hash,
    # enough to tell the lines apart.
    name = f"telegram:{profile}" if adapter == "telegram" else (
        "pi:local" if profile == "local" else f"pi:session:{channel_id[3:11]}")
    return {
        "channel": name,
        "adapter": adapter,
        "lease": {"state": state, "generation": 0 if lease is None else lease.generation},
        "cursor": store.cursor(conn, channel_id, identity.TELEGRAM_CURSOR),
        "inbox": {"backlog": backlog, "total": total},
        "deliveries": messages.delivery_counts(conn, channel_id),
        "last_error": None if error is None else {
            "method": error.get("method"), "code": error.get("errorCode"),
            "description": error.get("description"), "at": error.get("at")},
    }


def render_status(report: dict[str, Any]) -> str:
    """Human-readable form of `status_report`."""
    d = report["database"]
    lines = [
        f"database: {d['path']} ({d['size_bytes']} bytes), schema {d['schema']}",
        f"open decisions: {d['open_decisions']}",
        "active leases: " + _counts(d["active_leases"]),
        "unsettled effects: " + _counts(d["unsettled_effects"]),
    ]
    closed = [c for c in report["channels"] if _closed_pi_session(c)]
    for c in report["channels"]:
        if _closed_pi_session(c):
            continue
        lease = c["lease"]
        lines.append(
            f"{c['channel']}: lease {lease['state']} (generation {lease['generation']}),"
            f" cursor {c['cursor'] or '-'}, inbox backlog {c['inbox']['backlog']}"
            f" of {c['inbox']['total']}, deliveries {_counts(c['deliveries'])}")
        if c["last_error"]:
            e = c["last_error"]
            lines.append(f"  last provider error: {e['method']} {e['code']} {e['description']}")
    if closed:
        lines.append(f"pi sessions not running, with nothing waiting: {len(closed)}")
    return "\n".join(lines)


def _closed_pi_session(channel: dict[str, Any]) -> bool:
    """A Pi session no bridge serves now, with no backlog or pending delivery: every
    `pi --no-session` start leaves one, so they are counted, not listed."""
    return (str(channel["channel"]).startswith("pi:session:")
            and channel["lease"]["state"] != "held" and channel["inbox"]["backlog"] == 0
            and not channel["deliveries"].get("pending") and not channel["last_error"])


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"
