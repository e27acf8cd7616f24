"""Decision rows: opening a decision for a waiting attempt and reading it back.

Every function runs inside the caller's transaction; `load` re-verifies the stored request
against its digests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import apsw

from channels.decisions import runs
from channels.decisions.askers import Asker, asker_of
from channels.decisions.digests import digest_to_bytes
from channels.decisions.errors import DecisionRefused
from channels.decisions.request import (
    DecisionRequest,
    load_request,
)
from state import blobs, resources
from state.leases import Lease
from state.resources import ResourceType

__all__ = [
    "Outcome", "Provenance", "Resolution", "StoredDecision", "decision_of_resource",
    "decision_resource", "decisions_since", "load", "open_decision", "resolution_of", "run_of",
]


class Outcome(StrEnum):
    """How a decision ended (the resolutions' `outcome` CHECK set)."""

    ACCEPTED = "accepted"
    CANCELLED = "cancelled"


class Provenance(StrEnum):
    """What ended it (the resolutions' `provenance` CHECK set)."""

    HUMAN = "human"
    TIMEOUT_POLICY = "timeout_policy"
    EXPLICIT_CANCEL = "explicit_cancel"
    EXPIRED_NO_DEFAULT = "expired_no_default"


@dataclass(frozen=True, slots=True)
class Resolution:
    """The immutable winner of a decision."""

    decision_id: str
    outcome: Outcome
    provenance: Provenance
    response: dict[str, Any] | None
    reason: str | None
    resolved_at: int
    digest: bytes

    @property
    def choice(self) -> str | None:
        return None if self.response is None else str(self.response["choice"])


@dataclass(frozen=True, slots=True)
class StoredDecision:
    """A decision request row with its verified request document."""

    decision_id: str
    resource_id: str
    run_id: str
    attempt_id: str
    audience: str
    request: DecisionRequest
    deadline_at: int | None
    created_at: int

    def asker(self) -> Asker:
        """Who asked it: the agent and host its subject names, else as its run and context
        line say (`askers.asker_of`)."""
        doc = self.request.document
        return asker_of(doc.get("subject"), self.run_id, doc.get("presentation"))


def decision_resource(decision_id: str) -> str:
    """Resource id of a decision."""
    return f"decision:{decision_id}"


def decision_of_resource(resource_id: str) -> str:
    """The decision id of a decision's resource id (the source of the effects it caused)."""
    return resource_id.removeprefix("decision:")


def open_decision(conn: apsw.Connection, lease: Lease, request: DecisionRequest, now: int) -> str:
    """Record a new decision for the run's waiting attempt (run owner only). Idempotent."""
    doc = request.document
    runs.verify_owner(conn, lease, doc["runId"], now)
    existing = conn.execute(
        "SELECT request_digest FROM human_decisions WHERE decision_id = ?", (request.decision_id,)
    ).get
    if existing is not None:
        if bytes(existing) != digest_to_bytes(request.request_digest):
            raise DecisionRefused(f"decision {request.decision_id} exists with another request")
        return request.decision_id
    status = conn.execute(
        "SELECT status FROM node_attempts WHERE attempt_id = ? AND run_id = ?",
        (doc["attemptId"], doc["runId"]),
    ).get
    if status != "waiting":
        raise DecisionRefused(f"attempt {doc['attemptId']} of run {doc['runId']} is not waiting")
    resource_id = decision_resource(request.decision_id)
    resources.create(
        conn, resource_id, ResourceType.DECISION, lease.actor, now, event_type="decision.opened",
        # No payload: the immutable decision row holds its id and request digest.
        lease_generation=lease.generation,
    )
    default = request.default_response
    conn.execute(
        "INSERT INTO human_decisions (decision_id, resource_id, run_id, attempt_id, audience,"
        " title, subject_hash, presentation_hash, choices_hash, request_digest,"
        " presentation_revision, deadline_at, default_response_hash, request_hash, created_at)"
        " VALUES (:id, :resource, :run, :attempt, :audience, :title, :subject, :presentation,"
        " :choices, :digest, :revision, :deadline, :default, :request, :now)",
        {
            "id": request.decision_id,
            "resource": resource_id,
            "run": doc["runId"],
            "attempt": doc["attemptId"],
            "audience": doc["audience"],
            "title": doc["title"],
            "subject": blobs.put_json(conn, doc["subject"], now),
            "presentation": blobs.put_json(conn, doc["presentation"], now),
            # A list keeps the author's choice order, which canonical JSON objects would sort.
            "choices": blobs.put_json(conn, [{"id": cid, **choice}
                                             for cid, choice in doc["choices"].items()], now),
            "digest": digest_to_bytes(request.request_digest),
            "revision": doc["revision"],
            "deadline": request.expires_at_ms,
            "default": None if default is None else blobs.put_json(conn, dict(default), now),
            "request": blobs.put_json(conn, doc, now),
            "now": now,
        },
    )
    return request.decision_id


def load(conn: apsw.Connection, decision_id: str) -> StoredDecision:
    """A decision with its request re-verified against its digests; KeyError when unknown."""
    row = conn.execute(
        "SELECT decision_id, resource_id, run_id, attempt_id, audience, request_hash,"
        " deadline_at, created_at, choices_hash FROM human_decisions WHERE decision_id = ?",
        (decision_id,),
    ).fetchone()
    if row is None:
        raise KeyError(decision_id)
    stored = blobs.get_bytes(conn, bytes(row[5])), blobs.get_bytes(conn, bytes(row[8]))
    document = json.loads(stored[0])
    order = [str(c["id"]) for c in json.loads(stored[1])]
    if isinstance(document.get("choices"), dict) and set(order) == set(document["choices"]):
        document["choices"] = {cid: document["choices"][cid] for cid in order}
    request = load_request(document, stored)
    return StoredDecision(row[0], row[1], row[2], row[3], row[4], request, row[6], row[7])


def run_of(conn: apsw.Connection, decision_id: str) -> tuple[str, str]:
    """(run_id, workflow_ref) of the run a decision belongs to; KeyError when unknown."""
    row = conn.execute(
        "SELECT r.run_id, r.workflow_ref FROM human_decisions d JOIN runs r USING (run_id)"
        " WHERE d.decision_id = ?", (decision_id,)).fetchone()
    if row is None:
        raise KeyError(decision_id)
    return str(row[0]), str(row[1])


def resolution_of(conn: apsw.Connection, decision_id: str) -> Resolution | None:
    """The winner, if any."""
    row = conn.execute(
        "SELECT decision_id, outcome, provenance, response_hash, reason, resolved_at,"
        " resolution_digest FROM human_decision_resolutions WHERE decision_id = ?",
        (decision_id,),
    ).fetchone()
    if row is None:
        return None
    response = None if row[3] is None else blobs.get_json(conn, bytes(row[3]))
    return Resolution(row[0], Outcome(row[1]), Provenance(row[2]), response, row[4], row[5],
                      bytes(row[6]))


def decisions_since(conn: apsw.Connection, since: int) -> list[str]:
    """Decisions asked or resolved at or after `since`, in the order they were asked (the
    audit: an operator's command, so a scan of the history is acceptable here)."""
    return [str(r[0]) for r in conn.execute(
        "SELECT d.decision_id FROM human_decisions d"
        " LEFT JOIN human_decision_resolutions r ON r.decision_id = d.decision_id"
        " WHERE d.created_at >= :since OR r.resolved_at >= :since"
        " ORDER BY d.created_at, d.decision_id", {"since": since})]
