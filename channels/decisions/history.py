"""A decision's history for a person: who answered through which channel and when, and a
timeline of its events, deliveries (effect attempts) and submissions with their results.

Read-only, on the caller's connection. Channel names (`telegram:<profile>`, `pi:local`) are
shown; actor ids appear only for the person who answered or submitted (what `show` is for).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import apsw

from channels.decisions.records import decision_resource
from state import blobs, effects

__all__ = ["Entry", "Winner", "delivered_to", "timeline", "winner"]


@dataclass(frozen=True, slots=True)
class Winner:
    """How the decision was resolved: through which channel, by whom, when."""

    outcome: str
    provenance: str
    channel: str | None
    actor_id: str | None
    resolved_at: int
    event_id: str | None = None  # the channel's own id of the winning event (a Telegram update)


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of the timeline."""

    at: int
    what: str  # asked | attempt | submission | resolved
    detail: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "what": self.what, **self.detail}


def winner(conn: apsw.Connection, decision_id: str) -> Winner | None:
    row = conn.execute(
        "SELECT outcome, provenance, channel, actor_id, resolved_at, external_event_id"
        " FROM human_decision_resolutions WHERE decision_id = ?", (decision_id,)).fetchone()
    return None if row is None else Winner(str(row[0]), str(row[1]), row[2], row[3],
                                           int(row[4]), None if row[5] is None else str(row[5]))


def timeline(conn: apsw.Connection, decision_id: str) -> list[Entry]:
    """Everything that happened to a decision, in time order."""
    entries: list[Entry] = []
    row = conn.execute("SELECT created_at, audience FROM human_decisions WHERE decision_id = ?",
                       (decision_id,)).fetchone()
    if row is None:
        raise KeyError(decision_id)
    created, audience = row
    entries.append(Entry(int(created), "asked", {"audience": str(audience)}))
    names = _channel_names(conn)
    # An effect keyed by its channel's short key (or by `<channel id>:...`) names it.
    names.update({effects.scoped_key(c): n for c, n in list(names.items())})
    for effect_type, key, number, started, finished, outcome in conn.execute(
            "SELECT e.effect_type, e.idempotency_key, a.attempt_number, a.started_at,"
            " a.finished_at, a.outcome FROM effect_attempts a JOIN effects e USING (effect_id)"
            " WHERE e.source_resource_id = ? ORDER BY a.started_at, e.effect_id,"
            " a.attempt_number", (decision_resource(decision_id),)):
        entries.append(Entry(int(finished if finished is not None else started), "attempt", {
            "effect": str(effect_type), "channel": names.get(str(key).split(":")[0]),
            "attempt": int(number), "outcome": outcome or "in progress"}))
    for submitted, channel, actor, response, result in conn.execute(
            "SELECT submitted_at, channel, actor_id, response_hash, result"
            " FROM human_decision_submissions WHERE decision_id = ? ORDER BY submitted_at,"
            " rowid", (decision_id,)):
        choice = blobs.get_json(conn, bytes(response)).get("choice")
        entries.append(Entry(int(submitted), "submission", {
            "channel": str(channel), "actor": str(actor), "choice": choice,
            "result": str(result)}))
    won = winner(conn, decision_id)
    if won is not None:
        entries.append(Entry(won.resolved_at, "resolved", {
            "outcome": won.outcome, "provenance": won.provenance, "channel": won.channel}))
    order = {"asked": 0, "submission": 1, "resolved": 2, "attempt": 3}
    return sorted(entries, key=lambda e: (e.at, order[e.what]))


def delivered_to(conn: apsw.Connection, decision_id: str) -> list[str]:
    """The channels where the decision's delivery is confirmed, by name."""
    names = _channel_names(conn)
    return sorted({names.get(str(c), str(c)) for (c,) in conn.execute(
        "SELECT channel_id FROM channel_messages WHERE decision_id = ? AND purpose = 'delivery'"
        " AND status = 'confirmed'", (decision_id,))})


def _channel_names(conn: apsw.Connection) -> dict[str, str]:
    """channel_id -> the name people know it by."""
    return {str(c): (f"telegram:{p}" if a == "telegram" else
                     "pi:local" if p == "local" else "pi:session")
            for c, a, p in conn.execute(
                "SELECT channel_id, adapter_type, profile_key FROM channels")}
