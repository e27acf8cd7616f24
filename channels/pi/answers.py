"""Open decisions as Pi shows them, and answers from Pi sessions and the local operator view.

An answer is an inbox event on the Pi channel; processing it submits a human candidate
through the single resolution function in the same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import apsw

from channels import inbox
from channels.config.model import PI_CHANNEL, ChannelsConfig, audience_routes
from channels.decisions import records, resolution
from channels.decisions.presentation import render_person_text
from channels.decisions.records import StoredDecision
from channels.decisions.resolution import HumanAnswer, Result, Verdict
from channels.pi.sessions import LOCAL_PROFILE, claim_channel, local_channel_id, routes_to_pi
from state.database import Database
from state.leases import Lease

__all__ = [
    "AnswerEvent", "AnswerReport", "OpenDecision", "answer_locally", "load_open",
    "open_for_pi", "open_rows", "submit_answer",
]


_IGNORED = "ignored"


@dataclass(frozen=True, slots=True)
class OpenDecision:
    """An open decision as the Pi channel presents it."""

    decision_id: str
    request_digest: str
    title: str
    audience: str
    text: str
    choices: tuple[dict[str, Any], ...]
    deadline_at: int | None

    @classmethod
    def from_stored(cls, stored: StoredDecision) -> OpenDecision:
        """Build from a verified stored request."""
        request = stored.request
        return cls(
            decision_id=stored.decision_id,
            request_digest=request.request_digest,
            title=str(request.document["title"]),
            audience=stored.audience,
            text=render_person_text(request.document),
            choices=tuple(_choice_json(cid, choice) for cid, choice in request.choices.items()),
            deadline_at=stored.deadline_at,
        )

    def to_json(self) -> dict[str, Any]:
        """The wire and `--json` form."""
        return {
            "decision_id": self.decision_id, "request_digest": self.request_digest,
            "title": self.title, "audience": self.audience, "text": self.text,
            "choices": [dict(c) for c in self.choices], "deadline_at": self.deadline_at,
        }


def _choice_json(choice_id: str, choice: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": choice_id, "label": choice["label"], "input": None}
    if "input" in choice:
        spec = choice["input"]
        entry["input"] = {"name": spec["name"], "prompt": spec["prompt"],
                          "min_length": spec["minLength"], "max_length": spec["maxLength"]}
    return entry


def open_rows(
    conn: apsw.Connection, session_id: str | None, now: int | None
) -> list[tuple[str, str]]:
    """(decision_id, audience) of every open decision; runs started from `session_id` first.
    With `session_id`, a decision bound to another session is left out (it is shown where it
    was asked); unbound ones go to every session. With `now`, decisions past their deadline are
    left out: an answer could only be stale."""
    rows = conn.execute(
        "SELECT d.decision_id, d.audience FROM human_decisions d"
        " LEFT JOIN run_bindings b ON b.run_id = d.run_id"
        " WHERE NOT EXISTS (SELECT 1 FROM human_decision_resolutions r"
        " WHERE r.decision_id = d.decision_id)"
        " AND (:session IS NULL OR b.origin_session_id IS NULL"
        " OR b.origin_session_id = :session)"
        " AND (:now IS NULL OR d.deadline_at IS NULL OR d.deadline_at > :now)"
        " ORDER BY coalesce(b.origin_session_id = :session, 0) DESC, d.created_at, d.decision_id",
        {"session": session_id, "now": now},
    )
    return [(str(a), str(b)) for a, b in rows]


def open_for_pi(
    conn: apsw.Connection,
    config: ChannelsConfig | None,
    *,
    now: int | None = None,
    session_id: str | None = None,
) -> list[OpenDecision]:
    """Open decisions whose audience routes to `pi` (a session's own runs first; with `now`,
    only those still before their deadline)."""
    return [
        OpenDecision.from_stored(records.load(conn, decision_id))
        for decision_id, audience in open_rows(conn, session_id, now)
        if routes_to_pi(config, audience)
    ]


def load_open(conn: apsw.Connection, decision_id: str) -> OpenDecision:
    """One decision in the Pi presentation (open or not); KeyError when unknown."""
    return OpenDecision.from_stored(records.load(conn, decision_id))


@dataclass(frozen=True, slots=True)
class AnswerEvent:
    """One answer as a Pi channel received it (the adapter verified the actor)."""

    decision_id: str
    request_digest: str
    choice: str
    entered: Any  # None, the text for the choice's input, or an explicit {name: text} object
    actor_id: str
    event_key: str  # the inbox external_event_id and the idempotency key
    origin: str = "human"  # anything else is recorded and rejected by the resolution function
    details: dict[str, Any] = field(default_factory=dict)  # recorded in the inbox payload


@dataclass(frozen=True, slots=True)
class AnswerReport:
    """What happened to an answer, in the words the operator and the extension see."""

    decision_id: str
    result: str  # won | adopted | already_resolved | stale | rejected | ignored
    message: str
    outcome: str | None = None  # the decision's winner now: accepted | cancelled
    choice: str | None = None
    label: str | None = None
    reason: str | None = None
    duplicate: bool = False

    @property
    def accepted(self) -> bool:
        return self.result in (Result.WON.value, Result.ADOPTED.value)

    def describe(self) -> str:
        """One line for the operator: accepted, already decided (with the winner), stale,
        rejected (with the reason)."""
        if self.accepted:
            again = " (this answer was already recorded)" if self.result == "adopted" else ""
            return f"accepted: {self.label or self.choice}{again}"
        if self.result == "already_resolved":
            if self.outcome == records.Outcome.ACCEPTED:
                return f"already decided: {self.label or self.choice}"
            return f"already decided: cancelled ({self.reason})"
        if self.result == "stale":
            return f"stale: {self.message}"
        return f"rejected: {self.message}"

    def to_json(self) -> dict[str, Any]:
        """The stored inbox result and the wire form."""
        return {
            "decision_id": self.decision_id, "result": self.result, "message": self.message,
            "outcome": self.outcome, "choice": self.choice, "label": self.label,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, value: dict[str, Any], *, duplicate: bool) -> AnswerReport:
        """Rebuild a stored inbox result (a duplicate event replays it)."""
        return cls(
            decision_id=str(value["decision_id"]), result=str(value["result"]),
            message=str(value["message"]), outcome=value.get("outcome"),
            choice=value.get("choice"), label=value.get("label"), reason=value.get("reason"),
            duplicate=duplicate,
        )


def _response_for(decision: StoredDecision, choice: str, entered: Any) -> dict[str, Any]:
    """The response document: bare text goes under the choice's input name; anything else is
    passed through for the resolution function to judge."""
    response: dict[str, Any] = {"choice": choice}
    if entered is None:
        return response
    if isinstance(entered, str):
        known = decision.request.choices.get(choice)
        spec = None if known is None else known.get("input")
        response["input"] = {spec["name"] if spec else "text": entered}
        return response
    response["input"] = entered
    return response


def submit_answer(
    conn: apsw.Connection,
    lease: Lease,
    channel_id: str,
    event: AnswerEvent,
    now: int,
    config: ChannelsConfig | None,
) -> AnswerReport:
    """Inbox row, resolution and processing result in the caller's one write transaction.

    A repeated event key is not processed again: the first result is replayed.
    """
    inbound = inbox.InboundEvent(event.event_key, "answer", _inbox_payload(event))
    new = inbox.ingest(conn, lease, channel_id, [inbound], now)
    row = inbox.get_inbox(conn, channel_id, event.event_key)
    assert row is not None  # stored just now, or before
    if not new and row.result is not None:
        return AnswerReport.from_json(row.result, duplicate=True)
    report = _process(conn, event, now, config)
    row.mark_processed(conn, report.to_json(), now)
    return report


def _inbox_payload(event: AnswerEvent) -> dict[str, Any]:
    return {"decision_id": event.decision_id, "request_digest": event.request_digest,
            "choice": event.choice, "input": event.entered, "actor": event.actor_id,
            "origin": event.origin, **event.details}


def _process(
    conn: apsw.Connection, event: AnswerEvent, now: int, config: ChannelsConfig | None
) -> AnswerReport:
    try:
        decision = records.load(conn, event.decision_id)
    except KeyError:
        # Processed too (as ignored), so an unknown id is never retried forever.
        return AnswerReport(event.decision_id, _IGNORED, "unknown decision")
    candidate = HumanAnswer(
        decision_id=event.decision_id, request_digest=event.request_digest,
        response=_response_for(decision, event.choice, event.entered), channel=PI_CHANNEL,
        actor_id=event.actor_id, external_event_id=event.event_key,
        idempotency_key=event.event_key, origin=event.origin,
    )
    allowed = audience_routes(config, decision.audience)
    outcome = resolution.resolve(conn, candidate, now, allowed_channels=allowed)
    return _report(decision, outcome)


def _report(decision: StoredDecision, outcome: Verdict) -> AnswerReport:
    winner = outcome.resolution
    if winner is None:
        return AnswerReport(decision.decision_id, outcome.result.value, outcome.message)
    choice = winner.choice
    known = decision.request.choices.get(choice or "")
    return AnswerReport(
        decision.decision_id, outcome.result.value, outcome.message, outcome=winner.outcome,
        choice=choice, label=None if known is None else str(known["label"]),
        reason=winner.reason,
    )


def answer_locally(
    db: Database,
    event: AnswerEvent,
    owner_id: str,
    config: ChannelsConfig | None,
    *,
    wait_seconds: float = 3.0,
) -> AnswerReport:
    """The operator view's answer: claim the local channel lease, submit in one transaction,
    release. Each step is its own short transaction; nothing waits inside one."""
    channel_id = local_channel_id()
    lease = claim_channel(db, channel_id, LOCAL_PROFILE, owner_id, wait_seconds=wait_seconds)
    try:
        return db.write(lambda c: submit_answer(c, lease, channel_id, event, db.clock.now_ms(),
                                                config))
    finally:
        db.write(lambda c: lease.release(c, db.clock.now_ms()))
