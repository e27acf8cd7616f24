"""Human decisions in state.sqlite: opening, the single resolution function, and projections.

Every candidate (a verified human answer, the timeout policy, an explicit cancellation, a
no-default expiry) goes through `resolve`. The primary key of `human_decision_resolutions`
picks the one winner; the winning transaction also reserves every follow-up effect. Human
attempts are always recorded in `human_decision_submissions`, whatever their result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import apsw

from channels import runs
from channels.decision_request import (
    DecisionRequest,
    answer_digest,
    human_attempt_id,
    load_request,
    timeout_answer_digest,
    validate_response,
)
from channels.digests import digest_from_bytes, digest_to_bytes
from channels.errors import DecisionError, DecisionRefused, InvalidDigest
from state import blobs, effects, resources
from state.canonical import canonical_bytes, sha256
from state.leases import Lease
from state.resources import Actor

MODEL_ANSWER_MESSAGE = (
    "This checkpoint requires a verified human answer from Pi UI or a configured decision channel."
)
RUN_CONTINUE = "run.continue"


class Result(StrEnum):
    """What happened to one candidate."""

    WON = "won"
    ADOPTED = "adopted"
    ALREADY_RESOLVED = "already_resolved"
    STALE = "stale"
    REJECTED = "rejected"


# -- candidates --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HumanAnswer:
    """An answer from a verified channel actor (the adapter verified the actor)."""

    decision_id: str
    request_digest: str
    response: Any
    channel: str
    actor_id: str
    external_event_id: str
    idempotency_key: str
    origin: str = "human"  # anything else (model, tool) is refused


@dataclass(frozen=True, slots=True)
class DeadlinePolicy:
    """The run owner applies the deadline: timeout default or no-default expiry."""

    decision_id: str
    lease: Lease


@dataclass(frozen=True, slots=True)
class Cancellation:
    """An explicit cancellation by a control actor holding the run lease."""

    decision_id: str
    lease: Lease
    actor_id: str
    reason: str = "cancelled"


Candidate = HumanAnswer | DeadlinePolicy | Cancellation


@dataclass(frozen=True, slots=True)
class Resolution:
    """The immutable winner of a decision."""

    decision_id: str
    outcome: str
    provenance: str
    response: dict[str, Any] | None
    reason: str | None
    resolved_at: int
    digest: bytes

    @property
    def choice(self) -> str | None:
        return None if self.response is None else str(self.response["choice"])


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of one candidate and the decision's winner (if there is one now)."""

    result: Result
    message: str
    resolution: Resolution | None = None


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

    @property
    def has_default(self) -> bool:
        return self.request.default_response is not None


def decision_resource(decision_id: str) -> str:
    """Resource id of a decision."""
    return f"decision:{decision_id}"


# -- opening -----------------------------------------------------------------------------------


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
        conn, resource_id, "decision", lease.actor, now, event_type="decision.opened",
        payload={"decisionId": request.decision_id, "requestDigest": request.request_digest},
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
    document = blobs.get_json(conn, bytes(row[5]))
    order = [str(c["id"]) for c in blobs.get_json(conn, bytes(row[8]))]
    if isinstance(document.get("choices"), dict) and set(order) == set(document["choices"]):
        document["choices"] = {cid: document["choices"][cid] for cid in order}
    request = load_request(document)
    return StoredDecision(row[0], row[1], row[2], row[3], row[4], request, row[6], row[7])


def run_of(conn: apsw.Connection, decision_id: str) -> tuple[str, str]:
    """(run_id, workflow_ref) of the run a decision belongs to; KeyError when unknown."""
    row = conn.execute(
        "SELECT r.run_id, r.workflow_ref FROM human_decisions d JOIN runs r USING (run_id)"
        " WHERE d.decision_id = ?", (decision_id,)).fetchone()
    if row is None:
        raise KeyError(decision_id)
    return str(row[0]), str(row[1])


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
    return Resolution(row[0], row[1], row[2], response, row[4], row[5], bytes(row[6]))


# -- the single resolution function ------------------------------------------------------------


def resolve(
    conn: apsw.Connection,
    candidate: Candidate,
    now: int,
    *,
    allowed_channels: Sequence[str] = ("pi",),
    decision: StoredDecision | None = None,
) -> Outcome:
    """Arbitrate one candidate inside the caller's write transaction.

    `decision` may pass the request the caller already loaded (and verified) in this same
    transaction; it must be the candidate's decision.
    """
    if decision is None or decision.decision_id != candidate.decision_id:
        decision = load(conn, candidate.decision_id)
    if isinstance(candidate, HumanAnswer):
        return _resolve_human(conn, decision, candidate, now, allowed_channels)
    if isinstance(candidate, DeadlinePolicy):
        return _resolve_deadline(conn, decision, candidate, now)
    return _resolve_cancellation(conn, decision, candidate, now)


def _resolve_human(
    conn: apsw.Connection,
    decision: StoredDecision,
    answer: HumanAnswer,
    now: int,
    allowed_channels: Sequence[str],
) -> Outcome:
    response_bytes = _response_bytes(answer.response)
    previous = _previous_submission(conn, answer, response_bytes)
    if previous is not None:
        return previous
    winner = resolution_of(conn, decision.decision_id)
    result, message, response = _judge(decision, answer, winner, now, allowed_channels)
    if result is Result.WON:
        winner = _win_human(conn, decision, answer, response, now)
    _record_submission(conn, decision, answer, response_bytes, result, winner, now)
    return Outcome(result, message, winner)


def _judge(
    decision: StoredDecision,
    answer: HumanAnswer,
    winner: Resolution | None,
    now: int,
    allowed_channels: Sequence[str],
) -> tuple[Result, str, dict[str, Any] | None]:
    """Decide a fresh human attempt's result (no writes)."""
    if answer.origin != "human":
        return Result.REJECTED, MODEL_ANSWER_MESSAGE, None
    if answer.channel not in allowed_channels:
        return (Result.REJECTED,
                f"channel {answer.channel} is not allowed for audience {decision.audience}", None)
    if answer.request_digest != decision.request.request_digest:
        return Result.STALE, "Human decision answer is stale or belongs to another request", None
    if winner is not None:
        return Result.ALREADY_RESOLVED, _resolved_message(winner), None
    if decision.deadline_at is not None and now >= decision.deadline_at:
        return Result.STALE, "Human decision request has expired", None
    try:
        response = validate_response(decision.request.choices, answer.response)
    except DecisionError as exc:
        return Result.REJECTED, str(exc), None
    return Result.WON, "accepted", dict(response)


def _resolved_message(winner: Resolution) -> str:
    if winner.outcome == "cancelled":
        return f"Human decision request was {winner.reason}"
    return "That human decision was already answered."


def _response_bytes(response: Any) -> bytes:
    try:
        return canonical_bytes(response)
    except ValueError:
        return canonical_bytes({"unrepresentable": repr(response)[:200]})


def _previous_submission(
    conn: apsw.Connection, answer: HumanAnswer, response_bytes: bytes
) -> Outcome | None:
    """A retry under the same (channel, idempotency key) returns the first attempt's result."""
    row = conn.execute(
        "SELECT decision_id, request_digest, response_hash, result FROM human_decision_submissions"
        " WHERE channel = ? AND idempotency_key = ?",
        (answer.channel, answer.idempotency_key),
    ).fetchone()
    if row is None:
        return None
    same = (
        row[0] == answer.decision_id
        and bytes(row[1]) == _digest_bytes_or_zero(answer.request_digest)
        and bytes(row[2]) == sha256(response_bytes)
    )
    if not same:
        return Outcome(Result.REJECTED,
                       "Human decision idempotency key was reused for a different answer")
    winner = resolution_of(conn, answer.decision_id)
    if row[3] in (Result.WON, Result.ADOPTED):
        return Outcome(Result.ADOPTED, "identical retry of the accepted answer", winner)
    return Outcome(Result(row[3]), "repeat of an earlier submission", winner)


def _digest_bytes_or_zero(digest: str) -> bytes:
    """A malformed digest from a sender is recorded as 32 zero bytes (and judged stale)."""
    try:
        return digest_to_bytes(digest)
    except InvalidDigest:
        return bytes(32)


def _record_submission(
    conn: apsw.Connection,
    decision: StoredDecision,
    answer: HumanAnswer,
    response_bytes: bytes,
    result: Result,
    winner: Resolution | None,
    now: int,
) -> None:
    conn.execute(
        "INSERT INTO human_decision_submissions (submission_id, decision_id, request_digest,"
        " channel, actor_id, external_event_id, idempotency_key, response_hash, result,"
        " winner_digest, submitted_at) VALUES (:id, :decision, :digest, :channel, :actor,"
        " :event, :key, :response, :result, :winner, :now)",
        {
            "id": "submission-" + human_attempt_id(decision.decision_id,
                                                   f"{answer.channel}\0{answer.idempotency_key}"),
            "decision": decision.decision_id,
            "digest": _digest_bytes_or_zero(answer.request_digest),
            "channel": answer.channel,
            "actor": answer.actor_id,
            "event": answer.external_event_id,
            "key": answer.idempotency_key,
            "response": blobs.put_bytes(conn, response_bytes, blobs.JSON, now),
            "result": result.value,
            "winner": None if winner is None else winner.digest,
            "now": now,
        },
    )


def _resolve_deadline(
    conn: apsw.Connection, decision: StoredDecision, policy: DeadlinePolicy, now: int
) -> Outcome:
    runs.verify_owner(conn, policy.lease, decision.run_id, now)
    winner = resolution_of(conn, decision.decision_id)
    if winner is not None:
        return Outcome(Result.ALREADY_RESOLVED, _resolved_message(winner), winner)
    if decision.deadline_at is None:
        raise DecisionRefused(f"decision {decision.decision_id} has no deadline")
    if now < decision.deadline_at:
        raise DecisionRefused("Human decision timeout default is not eligible yet")
    default = decision.request.default_response
    if default is None:
        resolution = _win(conn, decision, outcome="cancelled", provenance="expired_no_default",
                          response=None, reason="expired", actor=Actor("policy"), now=now,
                          lease=policy.lease, basis=None)
    else:
        basis = timeout_answer_digest(decision.request.request_digest, default)
        resolution = _win(conn, decision, outcome="accepted", provenance="timeout_policy",
                          response=dict(default), reason=None, actor=Actor("policy"), now=now,
                          lease=policy.lease, basis=basis)
    return Outcome(Result.WON, resolution.provenance, resolution)


def _resolve_cancellation(
    conn: apsw.Connection, decision: StoredDecision, cancel: Cancellation, now: int
) -> Outcome:
    runs.verify_owner(conn, cancel.lease, decision.run_id, now)
    winner = resolution_of(conn, decision.decision_id)
    if winner is not None:
        if winner.outcome == "accepted":
            raise DecisionRefused("Resolved human decision cannot be cancelled")
        if winner.provenance == "explicit_cancel" and winner.reason == cancel.reason:
            return Outcome(Result.ADOPTED, "identical cancellation", winner)
        raise DecisionRefused("Immutable human decision cancellation conflicts")
    resolution = _win(conn, decision, outcome="cancelled", provenance="explicit_cancel",
                      response=None, reason=cancel.reason, actor=Actor("control", cancel.actor_id),
                      now=now, lease=cancel.lease, basis=None)
    return Outcome(Result.WON, "cancelled", resolution)


# -- the winning transaction -------------------------------------------------------------------


def _win_human(
    conn: apsw.Connection,
    decision: StoredDecision,
    answer: HumanAnswer,
    response: dict[str, Any] | None,
    now: int,
) -> Resolution:
    source = {"channel": answer.channel, "actorId": answer.actor_id,
              "eventId": answer.external_event_id}
    basis = answer_digest(response, source)  # type: ignore[arg-type]
    return _win(conn, decision, outcome="accepted", provenance="human", response=response,
                reason=None, actor=Actor("human", answer.actor_id), now=now, lease=None,
                basis=basis, human=answer)


def _win(
    conn: apsw.Connection,
    decision: StoredDecision,
    *,
    outcome: str,
    provenance: str,
    response: dict[str, Any] | None,
    reason: str | None,
    actor: Actor,
    now: int,
    lease: Lease | None,
    basis: str | None,
    human: HumanAnswer | None = None,
) -> Resolution:
    """Insert the winner, bump the decision once, and reserve every follow-up effect."""
    digest = sha256(canonical_bytes({
        "decisionId": decision.decision_id, "requestDigest": decision.request.request_digest,
        "outcome": outcome, "provenance": provenance, "answerDigest": basis, "reason": reason,
    }))
    conn.execute(
        "INSERT INTO human_decision_resolutions (decision_id, outcome, provenance, response_hash,"
        " reason, channel, actor_id, external_event_id, idempotency_key, resolution_digest,"
        " resolved_at) VALUES (:id, :outcome, :provenance, :response, :reason, :channel, :actor,"
        " :event, :key, :digest, :now)",
        {
            "id": decision.decision_id, "outcome": outcome, "provenance": provenance,
            "response": None if response is None else blobs.put_json(conn, response, now),
            "reason": reason,
            "channel": human.channel if human else None,
            "actor": actor.id,
            "event": human.external_event_id if human else None,
            "key": human.idempotency_key if human else None,
            "digest": digest,
            "now": now,
        },
    )
    revision = resources.bump_current(
        conn, decision.resource_id, "decision.resolved", actor, now,
        payload={"outcome": outcome, "provenance": provenance,
                 "resolutionDigest": digest_from_bytes(digest)},
        lease_generation=None if lease is None else lease.generation,
    )
    resolution = Resolution(decision.decision_id, outcome, provenance, response, reason, now,
                            digest)
    _reserve_follow_ups(conn, decision, resolution, revision, actor, now)
    return resolution


def _reserve_follow_ups(
    conn: apsw.Connection,
    decision: StoredDecision,
    resolution: Resolution,
    revision: int,
    actor: Actor,
    now: int,
) -> None:
    """run.continue for the run owner, one settlement per presenting channel, and closure of
    deliveries that have not gone out yet."""
    common = {"decisionId": decision.decision_id, "outcome": resolution.outcome,
              "provenance": resolution.provenance}
    effects.reserve(
        conn, source_resource_id=decision.resource_id, source_revision=revision,
        effect_type=RUN_CONTINUE, idempotency_key=decision.decision_id,
        payload={**common, "runId": decision.run_id, "attemptId": decision.attempt_id,
                 "response": resolution.response, "reason": resolution.reason},
        owner_scope="run", actor=actor, now=now,
    )
    for channel_id, adapter in _presenting_channels(conn, decision.decision_id):
        effects.reserve(
            conn, source_resource_id=decision.resource_id, source_revision=revision,
            effect_type=f"{adapter}.settle", idempotency_key=channel_id,
            payload={**common, "channelId": channel_id, "text": settlement_text(decision,
                                                                                resolution)},
            owner_scope="channel", actor=actor, now=now,
        )
    for effect in _pending_presentations(conn, decision.resource_id):
        effects.cancel(conn, effect, actor, now, "decision resolved before delivery")


def _presenting_channels(conn: apsw.Connection, decision_id: str) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT DISTINCT m.channel_id, c.adapter_type FROM channel_messages m"
        " JOIN channels c USING (channel_id)"
        " WHERE m.decision_id = ? AND m.purpose IN ('delivery', 'prompt') ORDER BY m.channel_id",
        (decision_id,),
    )
    return [(str(a), str(b)) for a, b in rows]


def _pending_presentations(conn: apsw.Connection, resource_id: str) -> list[effects.Effect]:
    ids = [
        str(r[0]) for r in conn.execute(
            "SELECT effect_id FROM effects WHERE source_resource_id = ? AND status = 'pending'"
            " AND (effect_type GLOB '*.deliver' OR effect_type GLOB '*.prompt')",
            (resource_id,),
        )
    ]
    return [effects.get(conn, i) for i in ids]


def settlement_text(decision: StoredDecision, resolution: Resolution) -> str:
    """The short outcome message channels post ("Accepted: Continue", "Cancelled: expired")."""
    if resolution.outcome == "accepted" and resolution.response is not None:
        choice = decision.request.choices.get(str(resolution.response["choice"]))
        label = choice["label"] if choice else str(resolution.response["choice"])
        suffix = " (timeout default)" if resolution.provenance == "timeout_policy" else ""
        return f"Accepted: {label}{suffix}\n{decision.request.document['title']}"
    return f"Cancelled: {resolution.reason}\n{decision.request.document['title']}"


# -- applying run.continue for runs this tool owns ---------------------------------------------


def apply_continue_locally(
    conn: apsw.Connection, decision_id: str, lease: Lease, now: int
) -> Resolution:
    """Finish the waiting run with the decision's outcome, exactly once (run owner only).

    A local effect: attempt, result and settlement are one transaction, so it is exactly once
    by construction.
    """
    decision = load(conn, decision_id)
    resolution = resolution_of(conn, decision_id)
    if resolution is None:
        raise DecisionRefused(f"decision {decision_id} is not resolved")
    effect = effects.get(conn, effects.effect_id_for(decision.resource_id, RUN_CONTINUE,
                                                     decision_id))
    if effect.status is effects.EffectStatus.APPLIED:
        return resolution
    output = {"decisionId": decision_id, "choice": resolution.choice,
              "input": None if resolution.response is None else resolution.response.get("input"),
              "provenance": resolution.provenance, "reason": resolution.reason}
    status: runs.TerminalStatus = "completed" if resolution.outcome == "accepted" else "cancelled"
    runs.finish_run(conn, lease, decision.run_id, decision.attempt_id, status, now,
                    output=output, detail=resolution.reason)
    effects.apply_locally(conn, effect, lease, now, result={"runStatus": status})
    return resolution


# -- read projection (query_only connections) --------------------------------------------------


@dataclass(frozen=True, slots=True)
class DecisionView:
    """What status surfaces show: no actor or channel identifiers."""

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
            "submissions": dict(self.submissions),
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
    )


def decision_id_prefix_match(conn: apsw.Connection, prefix: str) -> str:
    """Resolve a unique decision id prefix (like git), or raise KeyError."""
    rows = [str(r[0]) for r in conn.execute(
        "SELECT decision_id FROM human_decisions WHERE decision_id >= ? AND decision_id < ?"
        " LIMIT 2", (prefix, prefix + "\uffff"))]
    if len(rows) != 1:
        raise KeyError(prefix)
    return rows[0]
