"""The Pi channel: answers from the local operator view and from Pi sessions, deliveries into
Pi sessions, and their settlement.

Two kinds of Pi channel share these rules (ARCHITECTURE section 5):
- the local operator view, channel `pi_channel_id(None)` (profile `local`), actor `local:<uid>`;
- one channel per Pi session, `pi_channel_id(session_id)` (profile = the session id), actor =
  the session id, served by the `pi bridge` child that the Pi extension starts.

An answer is one transaction: the inbox row (deduplicated by its event key, fenced by the
channel lease), the single resolution function, and the row's processing result. The route
name passed to the resolution function is always `pi` (the audience route), whichever Pi
channel the inbox row lives in.

A delivery is a `delivery` channel message written before the bridge sends it (the row is the
intent) and confirmed with the Pi entry id as its reference. Because the row exists, the
resolution function reserves a `pi.settle` effect for that channel, which the bridge applies
by telling the extension.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import apsw

from channels import decisions, store
from channels.config import PI_CHANNEL, ChannelsConfig, audience_routes
from channels.decisions import HumanAnswer, Outcome, Result, StoredDecision
from channels.presentation import render_decision_text
from state import effects, leases
from state.clock import Entropy
from state.database import Database
from state.effects import Attempt, Effect
from state.errors import LeaseHeld, WriteRejected
from state.leases import Lease
from state.resources import Actor

LOCAL_PROFILE = "local"
SETTLE_EFFECT = "pi.settle"
DELIVERED_CURSOR = "pi_delivered"
IGNORED = "ignored"


def local_channel_id() -> str:
    """The operator view's channel: `pi-` + hash of `local`."""
    return store.pi_channel_id(None)


def session_channel_id(session_id: str) -> str:
    """A Pi session's channel: `pi-` + hash of the session id."""
    return store.pi_channel_id(session_id)


def routes_to_pi(config: ChannelsConfig | None, audience: str) -> bool:
    """True when the audience's routes include the Pi channel (no config: always)."""
    return PI_CHANNEL in audience_routes(config, audience)


# -- reading open decisions --------------------------------------------------------------------


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
            text=render_decision_text(request.document),
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


def _open_rows(
    conn: apsw.Connection, session_id: str | None, now: int | None
) -> list[tuple[str, str]]:
    """(decision_id, audience) of every open decision; runs started from `session_id` first.
    With `now`, decisions past their deadline are left out: an answer could only be stale."""
    rows = conn.execute(
        "SELECT d.decision_id, d.audience FROM human_decisions d"
        " LEFT JOIN run_bindings b ON b.run_id = d.run_id"
        " WHERE NOT EXISTS (SELECT 1 FROM human_decision_resolutions r"
        " WHERE r.decision_id = d.decision_id)"
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
        OpenDecision.from_stored(decisions.load(conn, decision_id))
        for decision_id, audience in _open_rows(conn, session_id, now)
        if routes_to_pi(config, audience)
    ]


def load_open(conn: apsw.Connection, decision_id: str) -> OpenDecision:
    """One decision in the Pi presentation (open or not); KeyError when unknown."""
    return OpenDecision.from_stored(decisions.load(conn, decision_id))


# -- answers -----------------------------------------------------------------------------------


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


def response_for(decision: StoredDecision, choice: str, entered: Any) -> dict[str, Any]:
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
    inbound = store.InboundEvent(event.event_key, "answer", _inbox_payload(event))
    new = store.ingest(conn, lease, channel_id, [inbound], now)
    if not new:
        stored = store.inbox_result(conn, channel_id, event.event_key)
        if stored is not None:
            return AnswerReport.from_json(stored, duplicate=True)
    report = _process(conn, event, now, config)
    store.mark_processed(conn, channel_id, event.event_key, report.to_json(), now)
    return report


def _inbox_payload(event: AnswerEvent) -> dict[str, Any]:
    return {"decision_id": event.decision_id, "request_digest": event.request_digest,
            "choice": event.choice, "input": event.entered, "actor": event.actor_id,
            "origin": event.origin, **event.details}


def _process(
    conn: apsw.Connection, event: AnswerEvent, now: int, config: ChannelsConfig | None
) -> AnswerReport:
    try:
        decision = decisions.load(conn, event.decision_id)
    except KeyError:
        # Processed too (as ignored), so an unknown id is never retried forever.
        return AnswerReport(event.decision_id, IGNORED, "unknown decision")
    candidate = HumanAnswer(
        decision_id=event.decision_id, request_digest=event.request_digest,
        response=response_for(decision, event.choice, event.entered), channel=PI_CHANNEL,
        actor_id=event.actor_id, external_event_id=event.event_key,
        idempotency_key=event.event_key, origin=event.origin,
    )
    allowed = audience_routes(config, decision.audience)
    outcome = decisions.resolve(conn, candidate, now, allowed_channels=allowed)
    return _report(decision, outcome)


def _report(decision: StoredDecision, outcome: Outcome) -> AnswerReport:
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
        db.write(lambda c: leases.release(c, lease, db.clock.now_ms()))


def claim_channel(
    db: Database, channel_id: str, profile_key: str, owner_id: str, *, wait_seconds: float
) -> Lease:
    """Register the Pi channel if needed and claim its lease, waiting up to `wait_seconds`
    for a live owner to finish (then LeaseHeld, exit 75)."""
    if db.read(lambda c: store.channel_row(c, channel_id)) is None:
        db.write(lambda c: store.ensure_channel(c, channel_id, "pi", profile_key,
                                                db.clock.now_ms()))
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return db.write(lambda c: store.claim(c, channel_id, owner_id, db.clock.now_ms(),
                                                  db.entropy))
        except LeaseHeld:
            if time.monotonic() >= deadline:
                raise LeaseHeld("another process is answering through this Pi channel;"
                                " try again shortly") from None
            time.sleep(0.1)


# -- deliveries into a Pi session --------------------------------------------------------------


def register_session(conn: apsw.Connection, session_id: str, now: int) -> str:
    """Register a Pi session's channel (idempotent); returns its channel id."""
    channel_id = session_channel_id(session_id)
    store.ensure_channel(conn, channel_id, "pi", session_id, now)
    return channel_id


def delivery_message_id(channel_id: str, decision_id: str) -> str:
    """The deterministic delivery message of a decision on a channel."""
    return store.message_id_for(channel_id, "delivery", decision_id)


def delivery_statuses(conn: apsw.Connection, channel_id: str) -> dict[str, str]:
    """decision_id -> status of this channel's delivery messages."""
    rows = conn.execute(
        "SELECT decision_id, status FROM channel_messages WHERE channel_id = ?"
        " AND purpose = 'delivery' AND decision_id IS NOT NULL",
        (channel_id,),
    )
    return {str(a): str(b) for a, b in rows}


@dataclass(frozen=True, slots=True)
class Delivery:
    """A decision to show in a Pi session, under its channel message id."""

    message_id: str
    decision: OpenDecision


def undelivered(
    conn: apsw.Connection,
    channel_id: str,
    session_id: str,
    config: ChannelsConfig | None,
    skip: frozenset[str] = frozenset(),
    *,
    now: int | None = None,
) -> list[Delivery]:
    """Open decisions routed to `pi` that this session has not confirmed (and that are not in
    `skip`, the ones this bridge already sent). Only these are loaded and rendered."""
    statuses = delivery_statuses(conn, channel_id)
    found = []
    for decision_id, audience in _open_rows(conn, session_id, now):
        if statuses.get(decision_id) == "confirmed" or decision_id in skip:
            continue
        if routes_to_pi(config, audience):
            found.append(Delivery(delivery_message_id(channel_id, decision_id),
                                  load_open(conn, decision_id)))
    return found


def record_deliveries(
    conn: apsw.Connection, lease: Lease, channel_id: str, deliveries: Sequence[Delivery], now: int
) -> list[Delivery]:
    """Write each delivery's message row (the intent) before it is sent; owner only.

    A decision resolved since it was read is skipped: its row would come too late to get a
    settlement, and the session must never be shown a decided question as open.
    """
    store.verify(conn, lease, channel_id, now)
    recorded = []
    for item in deliveries:
        if decisions.resolution_of(conn, item.decision.decision_id) is not None:
            continue
        store.ensure_message(conn, item.message_id, channel_id, item.decision.decision_id,
                             "delivery", item.decision.text, now)
        recorded.append(item)
    return recorded


def confirm_delivery(
    conn: apsw.Connection,
    lease: Lease,
    channel_id: str,
    session_id: str,
    message_id: str,
    entry_id: str,
    now: int,
) -> int:
    """Record the Pi entry id as the delivery's reference and advance the cursor of
    acknowledged deliveries; returns the cursor. WriteRejected for a message that is not a
    delivery of this channel."""
    store.verify(conn, lease, channel_id, now)
    message = store.get_message(conn, message_id)
    if message is None or message.channel_id != channel_id or message.purpose != "delivery":
        raise WriteRejected(f"{message_id} is not a delivery of this Pi session")
    store.set_message_status(conn, message_id, "confirmed", now, conversation_ref=session_id,
                             message_ref=entry_id)
    confirmed = store.delivery_counts(conn, channel_id).get("confirmed", 0)
    store.set_cursor(conn, lease, channel_id, DELIVERED_CURSOR, str(confirmed), now)
    return confirmed


# -- settlement --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Settlement:
    """A due `pi.settle` effect of one channel with what the extension is told."""

    effect_id: str
    decision_id: str
    outcome: str
    provenance: str
    text: str


def due_settlements(conn: apsw.Connection, channel_id: str, now: int) -> list[Settlement]:
    """Pending `pi.settle` effects of this channel (their idempotency key is the channel)."""
    found = []
    for effect in effects.list_due(conn, [SETTLE_EFFECT], now):
        if effect.idempotency_key != channel_id:
            continue
        body = effects.payload(conn, effect)
        found.append(Settlement(effect.effect_id, str(body["decisionId"]), str(body["outcome"]),
                                str(body["provenance"]), str(body["text"])))
    return found


def begin_settlement(
    conn: apsw.Connection,
    lease: Lease,
    channel_id: str,
    effect_id: str,
    now: int,
    entropy: Entropy,
) -> Attempt:
    """Start applying a settlement (the channel owner only)."""
    store.verify(conn, lease, channel_id, now)
    return effects.begin_attempt(conn, effect_id, "channel", lease.owner_id, now, entropy)


def finish_settlement(conn: apsw.Connection, attempt: Attempt, sent: bool, now: int) -> Effect:
    """Settle as applied, or, when the line provably was not written (the pipe was closed),
    make it pending again for the next bridge of this session."""
    if sent:
        return effects.finish_attempt(conn, attempt, "applied", now)
    return effects.finish_attempt(conn, attempt, "rejected", now, error={"pipe": "closed"},
                                  retry_at=now)


def recover_settlements(conn: apsw.Connection, lease: Lease, channel_id: str, now: int) -> int:
    """Attempts left `applying` by a dead bridge of this channel become pending again.

    A repeated `settle` is harmless (the extension only shows the outcome again), so an
    interrupted attempt is retried instead of being left ambiguous.
    """
    store.verify(conn, lease, channel_id, now)
    actor = Actor("channel", lease.owner_id)
    count = 0
    for effect in effects.abandoned(conn, [SETTLE_EFFECT], now):
        if effect.idempotency_key == channel_id:
            effects.interrupt(conn, effect, actor, now, provably_unsent=True)
            count += 1
    return count


__all__ = [
    "DELIVERED_CURSOR", "LOCAL_PROFILE", "SETTLE_EFFECT", "AnswerEvent", "AnswerReport",
    "Delivery", "OpenDecision", "Settlement", "answer_locally", "begin_settlement",
    "claim_channel", "confirm_delivery",
    "delivery_message_id", "delivery_statuses", "due_settlements", "finish_settlement",
    "load_open", "local_channel_id", "open_for_pi", "record_deliveries", "recover_settlements",
    "register_session", "response_for", "routes_to_pi", "session_channel_id", "submit_answer",
    "undelivered",
]
