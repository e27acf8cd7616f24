"""The single resolution function: every candidate for a decision goes through `resolve`.

A verified human answer, the timeout policy, an explicit cancellation or a no-default expiry:
the primary key of `human_decision_resolutions` picks the one winner, and the winning
transaction also reserves every follow-up effect. Human attempts are always recorded in
`human_decision_submissions`, whatever their result. Runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

import apsw

from channels.decisions import follow_ups, runs
from channels.decisions.choices import validate_response
from channels.decisions.digests import digest_to_bytes
from channels.decisions.errors import DecisionError, DecisionRefused, InvalidDigest
from channels.decisions.records import (
    Outcome,
    Provenance,
    Resolution,
    StoredDecision,
    load,
    resolution_of,
)
from channels.decisions.request import (
    answer_digest,
    human_attempt_id,
    timeout_answer_digest,
)
from state import blobs, resources
from state.canonical import JsonValue, canonical_bytes, sha256
from state.leases import Lease
from state.resources import Actor, ActorType

__all__ = [
    "MODEL_ANSWER_MESSAGE", "Cancellation", "DeadlinePolicy", "HumanAnswer", "Result",
    "Verdict", "resolve",
]


MODEL_ANSWER_MESSAGE = (
    "This checkpoint requires a verified human answer from Pi UI or a configured decision channel."
)



class Result(StrEnum):
    """What happened to one candidate."""

    WON = "won"
    ADOPTED = "adopted"
    ALREADY_RESOLVED = "already_resolved"
    STALE = "stale"
    REJECTED = "rejected"


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


_Candidate = HumanAnswer | DeadlinePolicy | Cancellation


@dataclass(frozen=True, slots=True)
class Verdict:
    """The result of one candidate and the decision's winner (if there is one now)."""

    result: Result
    message: str
    resolution: Resolution | None = None


def resolve(
    conn: apsw.Connection,
    candidate: _Candidate,
    now: int,
    *,
    allowed_channels: Sequence[str] = ("pi",),
    decision: StoredDecision | None = None,
) -> Verdict:
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
) -> Verdict:
    recorded = _recorded_response(answer.response)
    previous = _previous_submission(conn, answer, recorded)
    if previous is not None:
        return previous
    winner = resolution_of(conn, decision.decision_id)
    result, message, response = _judge(decision, answer, winner, now, allowed_channels)
    if result is Result.WON:
        winner = _win_human(conn, decision, answer, response, now)
    _record_submission(conn, decision, answer, recorded, result, winner, now)
    return Verdict(result, message, winner)


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
    if winner.outcome == Outcome.CANCELLED:
        return f"Human decision request was {winner.reason}"
    return "That human decision was already answered."


def _recorded_response(response: Any) -> JsonValue:
    """The response as a submission records it: itself, or a stand-in when canonical JSON
    cannot hold it."""
    try:
        canonical_bytes(response)
    except ValueError:
        return {"unrepresentable": repr(response)[:200]}
    return cast(JsonValue, response)


def _previous_submission(
    conn: apsw.Connection, answer: HumanAnswer, recorded: JsonValue
) -> Verdict | None:
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
        and bytes(row[2]) == sha256(canonical_bytes(recorded))
    )
    if not same:
        return Verdict(Result.REJECTED,
                       "Human decision idempotency key was reused for a different answer")
    winner = resolution_of(conn, answer.decision_id)
    if row[3] in (Result.WON, Result.ADOPTED):
        return Verdict(Result.ADOPTED, "identical retry of the accepted answer", winner)
    return Verdict(Result(row[3]), "repeat of an earlier submission", winner)


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
    recorded: JsonValue,
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
            # The answer's attempt id as the reference makes it (40 hex; earlier versions
            # wrote it after `submission-`: rows are found by channel and key, never by id).
            "id": human_attempt_id(decision.decision_id,
                                   f"{answer.channel}\0{answer.idempotency_key}"),
            "decision": decision.decision_id,
            "digest": _digest_bytes_or_zero(answer.request_digest),
            "channel": answer.channel,
            "actor": answer.actor_id,
            "event": answer.external_event_id,
            "key": answer.idempotency_key,
            "response": blobs.put_json(conn, recorded, now),
            "result": result.value,
            "winner": None if winner is None else winner.digest,
            "now": now,
        },
    )


def _resolve_deadline(
    conn: apsw.Connection, decision: StoredDecision, policy: DeadlinePolicy, now: int
) -> Verdict:
    runs.verify_owner(conn, policy.lease, decision.run_id, now)
    winner = resolution_of(conn, decision.decision_id)
    if winner is not None:
        return Verdict(Result.ALREADY_RESOLVED, _resolved_message(winner), winner)
    if decision.deadline_at is None:
        raise DecisionRefused(f"decision {decision.decision_id} has no deadline")
    if now < decision.deadline_at:
        raise DecisionRefused("Human decision timeout default is not eligible yet")
    default = decision.request.default_response
    if default is None:
        resolution = _win(conn, decision, outcome=Outcome.CANCELLED,
                          provenance=Provenance.EXPIRED_NO_DEFAULT,
                          response=None, reason="expired", actor=Actor(ActorType.POLICY), now=now,
                          lease=policy.lease, basis=None)
    else:
        basis = timeout_answer_digest(decision.request.request_digest, default)
        resolution = _win(conn, decision, outcome=Outcome.ACCEPTED,
                          provenance=Provenance.TIMEOUT_POLICY,
                          response=dict(default), reason=None, actor=Actor(ActorType.POLICY),
                          now=now, lease=policy.lease, basis=basis)
    return Verdict(Result.WON, resolution.provenance, resolution)


def _resolve_cancellation(
    conn: apsw.Connection, decision: StoredDecision, cancel: Cancellation, now: int
) -> Verdict:
    runs.verify_owner(conn, cancel.lease, decision.run_id, now)
    winner = resolution_of(conn, decision.decision_id)
    if winner is not None:
        if winner.outcome == Outcome.ACCEPTED:
            raise DecisionRefused("Resolved human decision cannot be cancelled")
        if winner.provenance == "explicit_cancel" and winner.reason == cancel.reason:
            return Verdict(Result.ADOPTED, "identical cancellation", winner)
        raise DecisionRefused("Immutable human decision cancellation conflicts")
    resolution = _win(conn, decision, outcome=Outcome.CANCELLED,
                      provenance=Provenance.EXPLICIT_CANCEL,
                      response=None, reason=cancel.reason,
                      actor=Actor(ActorType.CONTROL, cancel.actor_id), now=now, lease=cancel.lease,
                      basis=None)
    return Verdict(Result.WON, "cancelled", resolution)


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
    return _win(conn, decision, outcome=Outcome.ACCEPTED, provenance=Provenance.HUMAN,
                                response=response,
                reason=None, actor=Actor(ActorType.HUMAN, answer.actor_id), now=now, lease=None,
                basis=basis, human=answer)


def _win(
    conn: apsw.Connection,
    decision: StoredDecision,
    *,
    outcome: Outcome,
    provenance: Provenance,
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
        # No payload: the immutable resolution row holds outcome, provenance and digest.
        lease_generation=None if lease is None else lease.generation,
    )
    resolution = Resolution(decision.decision_id, outcome, provenance, response, reason, now,
                            digest)
    follow_ups.reserve(conn, decision, resolution, revision, actor, now,
                       answered_on=None if human is None else human.channel)
    return resolution
