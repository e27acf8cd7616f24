"""Read projections of decisions for status surfaces and for the channels' queries.

Read-only; every function runs on the caller's (usually query_only) connection.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import apsw

from channels.decisions.digests import digest_from_bytes
from channels.decisions.records import Resolution, StoredDecision, load, resolution_of
from channels.decisions.resolution import RUN_CONTINUE
from state import blobs, effects


def button_basis(
    conn: apsw.Connection, channel_id: str, resolved_since: int
) -> list[tuple[str, str, list[str]]]:
    """(decision_id, request digest, choice ids) of decisions with a delivery on the channel
    that are open or were resolved after `resolved_since`: what button tokens are made of.
    Reads no request document, so it stays cheap however long the history is."""
    rows: list[Any] = conn.execute(
        "SELECT d.decision_id, d.request_digest, d.choices_hash FROM human_decisions d"
        " LEFT JOIN human_decision_resolutions r USING (decision_id)"
        " WHERE (r.decision_id IS NULL OR r.resolved_at >= :since) AND EXISTS"
        " (SELECT 1 FROM channel_messages m WHERE m.decision_id = d.decision_id"
        "  AND m.channel_id = :channel AND m.purpose = 'delivery')",
        {"since": resolved_since, "channel": channel_id},
    ).fetchall()
    return [(str(d), digest_from_bytes(bytes(digest)),
             [str(c["id"]) for c in blobs.get_json(conn, bytes(h))]) for d, digest, h in rows]


@dataclass(frozen=True, slots=True)
class DecisionView:
    """What status surfaces show: no actor identifiers; of the winner only its channel's name."""

    decision_id: str
    title: str
    audience: str
    run_id: str
    status: str  # open | accepted | cancelled
    continuation: str  # none | pending | applied
    choice: str | None
    choice_label: str | None
    input: dict[str, Any] | None
    provenance: str | None
    reason: str | None
    deadline_at: int | None
    default_choice: str | None
    created_at: int
    resolved_at: int | None
    submissions: dict[str, int] = field(default_factory=dict)
    decided_by: str | None = None  # the winning channel's name, or timeout/cancel/expired

    @property
    def display_status(self) -> str:
        if self.status != "open" and self.continuation == "pending":
            return f"{self.status} (continuation pending)"
        return self.status

    def to_json(self) -> dict[str, Any]:
        return {
            "decision_id": self.decision_id, "title": self.title, "audience": self.audience,
            "run_id": self.run_id, "status": self.status, "continuation": self.continuation,
            "choice": self.choice, "choice_label": self.choice_label, "input": self.input,
            "provenance": self.provenance, "reason": self.reason,
            "deadline_at": self.deadline_at, "default_choice": self.default_choice,
            "created_at": self.created_at, "resolved_at": self.resolved_at,
            "submissions": dict(self.submissions), "decided_by": self.decided_by,
        }


def view(conn: apsw.Connection, decision_id: str) -> DecisionView:
    """Project one decision (KeyError when unknown)."""
    decision = load(conn, decision_id)
    resolution = resolution_of(conn, decision_id)
    return _view(conn, decision, resolution)


def list_views(conn: apsw.Connection, *, include_resolved: bool = False) -> list[DecisionView]:
    """Open decisions (or all), oldest first."""
    where = "" if include_resolved else (
        " WHERE NOT EXISTS (SELECT 1 FROM human_decision_resolutions r"
        " WHERE r.decision_id = d.decision_id)")
    ids = [str(r[0]) for r in conn.execute(
        f"SELECT decision_id FROM human_decisions d{where} ORDER BY created_at, decision_id")]
    return [view(conn, i) for i in ids]


def open_decision_ids(conn: apsw.Connection) -> list[str]:
    """Unresolved decisions, oldest first."""
    return [str(r[0]) for r in conn.execute(
        "SELECT decision_id FROM human_decisions d WHERE NOT EXISTS"
        " (SELECT 1 FROM human_decision_resolutions r WHERE r.decision_id = d.decision_id)"
        " ORDER BY created_at, decision_id")]


def count_open(conn: apsw.Connection) -> int:
    """How many decisions are unresolved."""
    return int(conn.execute(
        "SELECT count(*) FROM human_decisions d WHERE NOT EXISTS"
        " (SELECT 1 FROM human_decision_resolutions r WHERE r.decision_id = d.decision_id)").get)


def open_unexpired(conn: apsw.Connection, now: int) -> list[tuple[str, str]]:
    """(decision_id, audience) of unresolved decisions whose deadline has not passed."""
    return [(str(a), str(b)) for a, b in conn.execute(
        "SELECT decision_id, audience FROM human_decisions d"
        " WHERE (deadline_at IS NULL OR deadline_at > ?) AND NOT EXISTS"
        " (SELECT 1 FROM human_decision_resolutions r WHERE r.decision_id = d.decision_id)"
        " ORDER BY created_at, decision_id", (now,))]


def overdue_decision_ids(conn: apsw.Connection, now: int) -> list[str]:
    """Unresolved decisions whose deadline has passed."""
    return [str(r[0]) for r in conn.execute(
        "SELECT decision_id FROM human_decisions d WHERE deadline_at IS NOT NULL"
        " AND deadline_at <= ? AND NOT EXISTS (SELECT 1 FROM human_decision_resolutions r"
        " WHERE r.decision_id = d.decision_id) ORDER BY deadline_at", (now,))]


def pending_continuations(conn: apsw.Connection, workflow_ref: str) -> list[str]:
    """Resolved decisions of runs of `workflow_ref` whose run.continue is still pending."""
    return [str(r[0]) for r in conn.execute(
        "SELECT d.decision_id FROM effects e JOIN human_decisions d"
        " ON e.source_resource_id = d.resource_id JOIN runs r ON r.run_id = d.run_id"
        " WHERE e.effect_type = ? AND e.status = 'pending' AND r.workflow_ref = ?"
        " ORDER BY e.created_at", (RUN_CONTINUE, workflow_ref))]


_ENDED_BY = {"timeout_policy": "timeout", "expired_no_default": "expired",
             "explicit_cancel": "cancel"}


def _decided_by(conn: apsw.Connection, decision_id: str, provenance: str) -> str:
    """The channel name of a person's winning answer (no actor ids), or how it ended."""
    channel = conn.execute("SELECT channel FROM human_decision_resolutions WHERE decision_id = ?",
                           (decision_id,)).get
    return str(channel) if channel else _ENDED_BY.get(provenance, provenance)


def _view(
    conn: apsw.Connection, decision: StoredDecision, resolution: Resolution | None
) -> DecisionView:
    counts = Counter({
        str(result): int(n) for result, n in conn.execute(
            "SELECT result, count(*) FROM human_decision_submissions WHERE decision_id = ?"
            " GROUP BY result", (decision.decision_id,))
    })
    continuation = "none"
    if resolution is not None:
        status = conn.execute(
            "SELECT status FROM effects WHERE effect_id = ?",
            (effects.effect_id_for(decision.resource_id, RUN_CONTINUE, decision.decision_id),),
        ).get
        continuation = "applied" if status == "applied" else "pending"
    choice = resolution.choice if resolution else None
    decided_by = None if resolution is None else _decided_by(conn, decision.decision_id,
                                                              resolution.provenance)
    choices = decision.request.choices
    default = decision.request.default_response
    return DecisionView(
        decision_id=decision.decision_id,
        title=decision.request.document["title"],
        audience=decision.audience,
        run_id=decision.run_id,
        status="open" if resolution is None else resolution.outcome,
        continuation=continuation,
        choice=choice,
        choice_label=choices[choice]["label"] if choice in choices else None,
        input=(resolution.response or {}).get("input") if resolution else None,
        provenance=resolution.provenance if resolution else None,
        reason=resolution.reason if resolution else None,
        deadline_at=decision.deadline_at,
        default_choice=None if default is None else str(default["choice"]),
        created_at=decision.created_at,
        resolved_at=resolution.resolved_at if resolution else None,
        submissions=dict(counts),
        decided_by=decided_by,
    )


def decision_id_prefix_match(conn: apsw.Connection, prefix: str) -> str:
    """Resolve a unique decision id prefix (like git), or raise KeyError."""
    rows = [str(r[0]) for r in conn.execute(
        "SELECT decision_id FROM human_decisions WHERE decision_id >= ? AND decision_id < ?"
        " LIMIT 2", (prefix, prefix + "\uffff"))]
    if len(rows) != 1:
        raise KeyError(prefix)
    return rows[0]
