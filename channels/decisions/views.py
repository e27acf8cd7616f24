"""Read projections of decisions for status surfaces and for the channels' queries.

Read-only; every function runs on the caller's (usually query_only) connection.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import apsw

from channels.decisions.digests import digest_from_bytes
from channels.decisions.follow_ups import RUN_CONTINUE, continuation_effect
from channels.decisions.presentation import FINGERPRINT_LENGTH
from channels.decisions.records import Resolution, StoredDecision, load, resolution_of
from state import blobs, effects

__all__ = [
    "DecisionView", "accepted_subjects", "accepted_with_subject", "button_bases", "count_open",
    "decision_candidates", "fingerprint_of", "list_views", "open_decision_ids",
    "open_deliveries", "open_unexpired", "open_without_delivery", "overdue_decision_ids",
    "pending_continuations", "view", "winner_source",
]


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
    if not include_resolved:
        return [view(conn, i) for i in open_decision_ids(conn)]
    ids = [str(r[0]) for r in conn.execute(
        "SELECT decision_id FROM human_decisions ORDER BY created_at, decision_id")]
    return [view(conn, i) for i in ids]


# Unresolved decisions are found through their waiting node attempt: the partial index of
# active attempts holds only those, so these queries stay flat however long the history of
# settled decisions grows (a decision is opened on a waiting attempt, and its attempt stops
# waiting only when the resolved decision's continuation finishes the run). The `IN` term
# repeats the index's condition word for word (SQLite uses a partial index only then); CROSS
# JOIN keeps the attempts as the outer loop.
_OPEN_FROM = (
    " FROM node_attempts a INDEXED BY node_attempts_one_active_per_run"
    " CROSS JOIN human_decisions d ON d.run_id = a.run_id AND d.attempt_id = a.attempt_id"
)
_OPEN_WHERE = (
    " WHERE a.status IN ('pending', 'running', 'waiting') AND a.status = 'waiting'"
    " AND NOT EXISTS (SELECT 1 FROM human_decision_resolutions r"
    " WHERE r.decision_id = d.decision_id)"
)
_OPEN = _OPEN_FROM + _OPEN_WHERE


def open_deliveries(conn: apsw.Connection, channel_id: str) -> list[tuple[str, str, str]]:
    """(decision_id, resource_id, delivery message status) of the unresolved decisions with a
    delivery on the channel, oldest first (from the open ones: flat with history)."""
    rows: list[Any] = conn.execute(
        f"SELECT d.decision_id, d.resource_id, m.status{_OPEN_FROM}"
        " CROSS JOIN channel_messages m ON m.decision_id = d.decision_id"
        f"{_OPEN_WHERE} AND m.channel_id = ? AND m.purpose = 'delivery'"
        " ORDER BY d.created_at, d.decision_id",
        (channel_id,),
    ).fetchall()
    return [(str(a), str(b), str(c)) for a, b, c in rows]


_BASIS = "SELECT d.decision_id, d.request_digest, d.choices_hash"


def _basis(conn: apsw.Connection, rows: list[Any]) -> list[tuple[str, str, list[str]]]:
    return [(str(d), digest_from_bytes(bytes(digest)),
             [str(c["id"]) for c in blobs.get_json(conn, bytes(h))]) for d, digest, h in rows]


def button_bases(
    conn: apsw.Connection, channel_id: str, settle_type: str, *, chat: str | None = None,
    message_ref: str | None = None, resolved_since: int = 0,
) -> Iterator[list[tuple[str, str, list[str]]]]:
    """(decision_id, request digest, choice ids) of the decisions whose button tokens may be
    pressed on the channel, in the order a lookup that missed reads them, each read only when
    the next is asked for: first the decision whose delivery includes the sent message
    `message_ref` in `chat` (when given), if it is open or was resolved after
    `resolved_since` (one indexed lookup); then every decision whose keyboard may still
    show."""
    if chat is not None and message_ref is not None:
        yield _basis_of_message(conn, channel_id, chat, message_ref, resolved_since)
    yield _showing_basis(conn, channel_id, settle_type)


def _basis_of_message(
    conn: apsw.Connection, channel_id: str, chat: str, message_ref: str, resolved_since: int
) -> list[tuple[str, str, list[str]]]:
    return _basis(conn, conn.execute(
        f"{_BASIS} FROM channel_message_parts p"
        " JOIN channel_messages m ON m.message_id = p.message_id"
        " JOIN human_decisions d ON d.decision_id = m.decision_id"
        " LEFT JOIN human_decision_resolutions r ON r.decision_id = d.decision_id"
        " WHERE p.external_conversation_ref = :chat AND p.external_message_ref = :ref"
        " AND m.channel_id = :channel AND m.purpose = 'delivery'"
        " AND (r.decision_id IS NULL OR r.resolved_at >= :since)",
        {"chat": chat, "ref": message_ref, "channel": channel_id, "since": resolved_since},
    ).fetchall())


def _showing_basis(
    conn: apsw.Connection, channel_id: str, settle_type: str
) -> list[tuple[str, str, list[str]]]:
    """Every decision whose keyboard may still show on the channel: open ones with a
    delivery there, resolved ones whose settlement there (`settle_type`, which removes the
    keyboards) is not done yet, and those with a delivery part whose send response was lost
    (its keyboard is on a message we never learned, so settlement could not remove it). Each
    reads only unsettled or unreferenced rows, through indexes, however long the history
    is."""
    open_rows = conn.execute(
        f"{_BASIS}{_OPEN} AND EXISTS (SELECT 1 FROM channel_messages m"
        " WHERE m.decision_id = d.decision_id AND m.channel_id = :channel"
        " AND m.purpose = 'delivery')", {"channel": channel_id}).fetchall()
    settling = conn.execute(
        f"{_BASIS} FROM effects e JOIN human_decisions d ON d.resource_id = e.source_resource_id"
        " WHERE e.status IN ('pending', 'applying') AND e.effect_type = :type"
        " AND e.idempotency_key IN (:channel, :short)",  # the short key, or an earlier one
        {"type": settle_type, "channel": channel_id, "short": effects.scoped_key(channel_id)}
    ).fetchall()
    unreferenced = conn.execute(
        f"{_BASIS} FROM channel_message_parts p"
        " JOIN channel_messages m ON m.message_id = p.message_id"
        " JOIN human_decisions d ON d.decision_id = m.decision_id"
        " WHERE p.external_conversation_ref IS NULL AND m.channel_id = :channel"
        " AND m.purpose = 'delivery'", {"channel": channel_id}).fetchall()
    return _basis(conn, list(dict.fromkeys(open_rows + settling + unreferenced)))


def open_decision_ids(conn: apsw.Connection) -> list[str]:
    """Unresolved decisions, oldest first."""
    return [str(r[0]) for r in conn.execute(
        f"SELECT d.decision_id{_OPEN} ORDER BY d.created_at, d.decision_id")]


def open_without_delivery(conn: apsw.Connection, channel_id: str) -> list[tuple[str, str]]:
    """(decision_id, resource_id) of the unresolved decisions with no delivery message on the
    channel (yet, or because their delivery failed before writing one), oldest first."""
    rows: list[Any] = conn.execute(
        f"SELECT d.decision_id, d.resource_id{_OPEN} AND NOT EXISTS (SELECT 1 FROM"
        " channel_messages m WHERE m.decision_id = d.decision_id AND m.channel_id = ?"
        " AND m.purpose = 'delivery') ORDER BY d.created_at, d.decision_id", (channel_id,),
    ).fetchall()
    return [(str(a), str(b)) for a, b in rows]


def count_open(conn: apsw.Connection) -> int:
    """How many decisions are unresolved."""
    return int(conn.execute(f"SELECT count(*){_OPEN}").get)


def open_unexpired(conn: apsw.Connection, now: int, *,
                   asked_before: int | None = None) -> list[tuple[str, str]]:
    """(decision_id, audience) of unresolved decisions whose deadline has not passed (and,
    with `asked_before`, asked at or before that time)."""
    return [(str(a), str(b)) for a, b in conn.execute(
        f"SELECT d.decision_id, d.audience{_OPEN}"
        " AND (d.deadline_at IS NULL OR d.deadline_at > ?)"
        " AND (? IS NULL OR d.created_at <= ?)"
        " ORDER BY d.created_at, d.decision_id", (now, asked_before, asked_before))]


def overdue_decision_ids(conn: apsw.Connection, now: int) -> list[str]:
    """Unresolved decisions whose deadline has passed."""
    return [str(r[0]) for r in conn.execute(
        f"SELECT d.decision_id{_OPEN} AND d.deadline_at IS NOT NULL AND d.deadline_at <= ?"
        " ORDER BY d.deadline_at", (now,))]


def pending_continuations(conn: apsw.Connection, workflow_ref: str) -> list[str]:
    """Resolved decisions of runs of `workflow_ref` whose run.continue is still pending (read
    through the partial index of unsettled effects: its condition is repeated word for word)."""
    return [str(r[0]) for r in conn.execute(
        "SELECT d.decision_id FROM effects e JOIN human_decisions d"
        " ON e.source_resource_id = d.resource_id JOIN runs r ON r.run_id = d.run_id"
        " WHERE e.status IN ('pending', 'applying') AND e.status = 'pending'"
        " AND e.effect_type = ? AND r.workflow_ref = ?"
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
        effect = continuation_effect(conn, decision)
        applied = effect is not None and effect.status is effects.EffectStatus.APPLIED
        continuation = "applied" if applied else "pending"
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


_HEX = re.compile(r"[0-9a-f]{4,64}")
_PASTED = "decision "  # "Decision 2a06a17d99d4", as a Telegram message ends


def decision_candidates(conn: apsw.Connection, text: str, limit: int = 10) -> list[str]:
    """Decisions a person may mean by `text`: a decision id or a prefix of one (like git),
    or the `Decision <fingerprint>` shown in every message, or a prefix of that fingerprint.
    Oldest first, at most `limit` (enough to list an ambiguous prefix's candidates)."""
    wanted = text.strip().lower()
    if wanted.startswith(_PASTED):
        wanted = wanted[len(_PASTED):].strip()
    if not wanted:
        return []
    prefixes = [wanted]
    if _HEX.fullmatch(wanted):
        prefixes.append("decision-" + wanted)  # the hex of an id without its `decision-`
    found: dict[str, None] = {}
    for prefix in prefixes:
        for (decision_id,) in conn.execute(
                "SELECT decision_id FROM human_decisions WHERE decision_id >= ?"
                " AND decision_id < ? ORDER BY created_at, decision_id LIMIT ?",
                (prefix, prefix + "\uffff", limit)):
            found[str(decision_id)] = None
    if _HEX.fullmatch(wanted) and len(wanted) <= FINGERPRINT_LENGTH:
        for decision_id, presentation in conn.execute(
                "SELECT decision_id, presentation_hash FROM human_decisions"
                " ORDER BY created_at, decision_id"):
            if _fingerprint(conn, bytes(presentation)).startswith(wanted):
                found[str(decision_id)] = None
    return list(found)[:limit]


def fingerprint_of(conn: apsw.Connection, decision_id: str) -> str:
    """The decision's `Decision <fp>` fingerprint: 12 hex of its presentation digest (the
    SHA-256 of the stored canonical presentation and a LF), without re-verifying the request."""
    presentation = conn.execute(
        "SELECT presentation_hash FROM human_decisions WHERE decision_id = ?", (decision_id,)).get
    if presentation is None:
        raise KeyError(decision_id)
    return _fingerprint(conn, bytes(presentation))


def _fingerprint(conn: apsw.Connection, presentation_hash: bytes) -> str:
    content = blobs.get_bytes(conn, presentation_hash)
    return hashlib.sha256(content + b"\n").hexdigest()[:FINGERPRINT_LENGTH]


def accepted_with_subject(
    conn: apsw.Connection, run_prefix: str, subject_hash: bytes, choice: str
) -> list[str]:
    """Decisions of the runs whose id starts with `run_prefix`, asked about exactly this
    subject and accepted with `choice`, oldest first: a range of the runs' primary key, then
    the decisions' run index (flat however long the history of other runs grows)."""
    rows: list[Any] = conn.execute(
        "SELECT d.decision_id, x.response_hash FROM runs r"
        " JOIN human_decisions d ON d.run_id = r.run_id"
        " JOIN human_decision_resolutions x ON x.decision_id = d.decision_id"
        " WHERE r.run_id >= :low AND r.run_id < :high AND d.subject_hash = :subject"
        " AND x.outcome = 'accepted' ORDER BY x.resolved_at, d.decision_id",
        {"low": run_prefix, "high": run_prefix + "\uffff", "subject": subject_hash},
    ).fetchall()
    return [str(d) for d, response in rows
            if blobs.get_json(conn, bytes(response)).get("choice") == choice]


def accepted_subjects(
    conn: apsw.Connection, run_prefix: str, choice: str
) -> list[tuple[str, Any]]:
    """(decision_id, subject) of every decision of the runs under `run_prefix` accepted with
    `choice`, oldest first (the same range of the runs' primary key)."""
    rows: list[Any] = conn.execute(
        "SELECT d.decision_id, d.subject_hash, x.response_hash FROM runs r"
        " JOIN human_decisions d ON d.run_id = r.run_id"
        " JOIN human_decision_resolutions x ON x.decision_id = d.decision_id"
        " WHERE r.run_id >= :low AND r.run_id < :high AND x.outcome = 'accepted'"
        " ORDER BY x.resolved_at, d.decision_id",
        {"low": run_prefix, "high": run_prefix + "\uffff"},
    ).fetchall()
    return [(str(d), blobs.get_json(conn, bytes(subject))) for d, subject, response in rows
            if blobs.get_json(conn, bytes(response)).get("choice") == choice]


def winner_source(conn: apsw.Connection, decision_id: str) -> tuple[str | None, bool]:
    """(channel of a person's winning answer or None, whether it came from the terminal
    operator view, whose actor is `local:<uid>`): where an answer came from, no actor id."""
    row = conn.execute("SELECT channel, actor_id FROM human_decision_resolutions"
                       " WHERE decision_id = ?", (decision_id,)).fetchone()
    if row is None or row[0] is None:
        return None, False
    return str(row[0]), str(row[1] or "").startswith("local:")
