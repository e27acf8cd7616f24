"""What a decision's resolution sets going, reserved in the winning transaction: the run's
continuation, a settlement per channel that presented it, closure of deliveries not yet gone
out, and the deferred turn back to an asking Pi session; and the continuation applied
locally, which finishes the waiting run exactly once. Runs inside the caller's transaction.
"""

from __future__ import annotations

from typing import Any

import apsw

from channels.decisions import runs, turn_intents
from channels.decisions.errors import DecisionRefused
from channels.decisions.presentation import fingerprint
from channels.decisions.records import (
    Outcome,
    Resolution,
    StoredDecision,
    load,
    resolution_of,
)
from state import effects
from state.effects import OwnerScope
from state.leases import Lease
from state.resources import Actor

__all__ = [
    "CONTINUE_KEY", "RUN_CONTINUE", "apply_continue_locally", "continuation_effect", "reserve",
]


RUN_CONTINUE = "run.continue"
# The key of a decision's one run.continue (its source is the decision, its cause the
# resolution). Earlier versions keyed it by the decision id: see `continuation_effect`.
CONTINUE_KEY = "resolved"


def reserve(
    conn: apsw.Connection,
    decision: StoredDecision,
    resolution: Resolution,
    revision: int,
    actor: Actor,
    now: int,
    *,
    answered_on: str | None,
) -> None:
    """In the winning transaction: run.continue for the run owner, one settlement per
    presenting channel, closure of deliveries that have not gone out yet, and the deferred
    turn of a run bound to a Pi session. `answered_on`: the channel of a person's answer."""
    # The payloads name only what the effect's source (the decision: its run and attempt)
    # and key (the channel) do not, so that most are one shared blob (the same answer).
    common = {"outcome": resolution.outcome, "provenance": resolution.provenance}
    effects.reserve(
        conn, source_resource_id=decision.resource_id, source_revision=revision,
        effect_type=RUN_CONTINUE, idempotency_key=CONTINUE_KEY,
        payload={**common, "response": resolution.response, "reason": resolution.reason},
        owner_scope=OwnerScope.RUN, actor=actor, now=now, recorded_by_source=True,
    )
    for channel_id, adapter in _presenting_channels(conn, decision.decision_id):
        # Telegram renders its own outcome post when it settles; Pi shows this text (and
        # where an answer came from, itself: its settle notice).
        extra = {} if adapter != "pi" else {
            "decisionId": decision.decision_id, "channelId": channel_id,
            "text": _settlement_text(decision, resolution, None)}
        effects.reserve(
            conn, source_resource_id=decision.resource_id, source_revision=revision,
            effect_type=f"{adapter}.settle", idempotency_key=effects.scoped_key(channel_id),
            payload={**common, **extra},
            owner_scope=OwnerScope.CHANNEL, actor=actor, now=now, recorded_by_source=True,
        )
    for effect in _pending_presentations(conn, decision.resource_id):
        effect.cancel(conn, actor, now, "decision resolved before delivery")
    _reserve_turn_intent(conn, decision, resolution, revision, actor, now, answered_on)


def _reserve_turn_intent(
    conn: apsw.Connection,
    decision: StoredDecision,
    resolution: Resolution,
    revision: int,
    actor: Actor,
    now: int,
    answered_on: str | None,
) -> None:
    """A run bound to a Pi session gets its answer back there as a deferred model turn."""
    session_id = runs.turn_session(conn, decision.run_id)
    if session_id is None:
        return
    turn_intents.reserve_turn_intent(
        conn, source_resource_id=decision.resource_id, source_revision=revision,
        run_id=decision.run_id, target_session_id=session_id,
        facts=_turn_facts(decision, resolution, actor, answered_on), actor=actor, now=now,
    )


def _turn_facts(decision: StoredDecision, resolution: Resolution, actor: Actor,
               answered_on: str | None) -> dict[str, Any]:
    """The safe facts a deferred turn tells the model (no request internals, no tokens)."""
    response = resolution.response or {}
    known = decision.request.choices.get(str(response.get("choice", "")))
    return {
        "decisionId": decision.decision_id,
        "fingerprint": fingerprint(decision.request.presentation_digest),
        "title": str(decision.request.document["title"]),
        "outcome": resolution.outcome, "provenance": resolution.provenance,
        "choice": response.get("choice"),
        "choiceLabel": None if known is None else str(known["label"]),
        "input": response.get("input"), "reason": resolution.reason,
        "channel": answered_on,
        # Only the kind of actor: the model learns that a person answered, never who (a
        # person's verified id is private, as are owner ids).
        "actor": "a person" if answered_on is not None else actor.type,
    }


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
            " AND (effect_type GLOB '*.deliver' OR effect_type GLOB '*.prompt'"
            " OR effect_type GLOB '*.remind')",
            (resource_id,),
        )
    ]
    return [effects.get(conn, i) for i in ids]


def continuation_effect(conn: apsw.Connection, decision: StoredDecision) -> effects.Effect | None:
    """A resolved decision's run.continue (None before the resolution), also one reserved by
    an earlier version under the decision id as its key (the source already names the
    decision: a short key is stored twice less)."""
    return effects.find(conn, decision.resource_id, RUN_CONTINUE, CONTINUE_KEY) \
        or effects.find(conn, decision.resource_id, RUN_CONTINUE, decision.decision_id)


def _settlement_text(decision: StoredDecision, resolution: Resolution,
                    where: str | None = None) -> str:
    """The short outcome message channels post ("Accepted: Continue", "Cancelled: expired",
    "Accepted: Allow once (answered in Pi)")."""
    if resolution.outcome == Outcome.ACCEPTED and resolution.response is not None:
        choice = decision.request.choices.get(str(resolution.response["choice"]))
        label = choice["label"] if choice else str(resolution.response["choice"])
        suffix = " (timeout default)" if resolution.provenance == "timeout_policy" else ""
        suffix = f" ({where})" if where else suffix
        return f"Accepted: {label}{suffix}\n{decision.request.document['title']}"
    return f"Cancelled: {resolution.reason}\n{decision.request.document['title']}"


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
    effect = continuation_effect(conn, decision)
    if effect is None:
        raise KeyError(f"run.continue of {decision_id}")
    if effect.status is effects.EffectStatus.APPLIED:
        return resolution
    # The node's output is the response (the reference's `output[node]`): the resolution's
    # own blob. A cancelled run has none; its reason is its status detail (and the
    # resolution's, with the provenance).
    status: runs.TerminalStatus = (runs.RunStatus.COMPLETED
                                   if resolution.outcome == Outcome.ACCEPTED
                                   else runs.RunStatus.CANCELLED)
    runs.finish_run(conn, lease, decision.run_id, decision.attempt_id, status, now,
                    output=resolution.response, detail=resolution.reason)
    effect.apply_locally(conn, lease, now, result={"runStatus": status})
    return resolution
