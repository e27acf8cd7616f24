"""Deferred turns: the answer to a decision goes back to the agent session whose run asked it.

A `turn_intents` row and its `pi.turn` effect are reserved in the transaction that resolves
the decision (the resolution's follow-up, so this module sits beside it in `decisions`). The
session's bridge (`channels.pi`) offers each pending one to its extension, which adds it to
the session as a follow-up message that starts a model turn, with the row id in `details`;
the Pi entry id it reports is the receipt, and settles the effect. Before sending, the
extension looks for that id in the session, so a restart or `/reload` never delivers a turn
twice; a closed session gets it when it is opened again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import apsw

from state import blobs, effects
from state.effects import OwnerScope
from state.leases import Lease
from state.resources import Actor

__all__ = [
    "confirm_turn", "due_turns", "pending_count", "reserve_turn_intent", "turn_entry",
    "turn_intent_id_for",
]


_TURN_EFFECT = "pi.turn"
_RESOLUTION_TYPE = "human_decision"


@dataclass(frozen=True, slots=True)
class _TurnIntent:
    """A pending deferred turn for one session, with the text the model is given."""

    turn_intent_id: str
    effect_id: str
    decision_id: str
    content: str
    by_person: bool = False  # a person's answer (not a timeout, a cancellation or an expiry)


def turn_intent_id_for(decision_id: str) -> str:
    """One turn per decision: the same resolution always names the same row."""
    return "turn-" + hashlib.sha256(f"{_RESOLUTION_TYPE}\0{decision_id}".encode()).hexdigest()[:32]


def reserve_turn_intent(
    conn: apsw.Connection,
    *,
    source_resource_id: str,
    source_revision: int,
    run_id: str,
    target_session_id: str,
    facts: dict[str, Any],
    actor: Actor,
    now: int,
) -> str:
    """Reserve the turn and its effect in the caller's (the winning) transaction."""
    decision_id = str(facts["decisionId"])
    turn_intent_id = turn_intent_id_for(decision_id)
    reservation = effects.reserve(
        conn, source_resource_id=source_resource_id, source_revision=source_revision,
        effect_type=_TURN_EFFECT, idempotency_key=target_session_id,
        payload={"turnIntentId": turn_intent_id, "targetSessionId": target_session_id,
                 "decisionId": decision_id},
        owner_scope=OwnerScope.CHANNEL, actor=actor, now=now,
    )
    conn.execute(
        "INSERT INTO turn_intents (turn_intent_id, effect_id, run_id, target_session_id,"
        " resolution_type, facts_hash, eligible_at, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (turn_intent_id) DO NOTHING",
        (turn_intent_id, reservation.effect_id, run_id, target_session_id, _RESOLUTION_TYPE,
         blobs.put_json(conn, facts, now), now, now),
    )
    return turn_intent_id


def due_turns(conn: apsw.Connection, session_id: str, now: int) -> list[_TurnIntent]:
    """Pending turns of this session whose time has come, oldest first."""
    rows = conn.execute(
        "SELECT t.turn_intent_id, t.effect_id, t.facts_hash FROM turn_intents t"
        " JOIN effects e ON e.effect_id = t.effect_id"
        " WHERE t.target_session_id = ? AND e.status = 'pending' AND t.eligible_at <= ?"
        " AND (e.next_attempt_at IS NULL OR e.next_attempt_at <= ?)"
        " ORDER BY t.created_at, t.turn_intent_id",
        (session_id, now, now),
    )
    found = []
    for turn_intent_id, effect_id, facts_hash in rows.fetchall():
        facts = blobs.get_json(conn, bytes(facts_hash))  # type: ignore[arg-type]
        found.append(_TurnIntent(str(turn_intent_id), str(effect_id), str(facts["decisionId"]),
                                _turn_text(facts), facts.get("provenance") == "human"))
    return found


def pending_count(conn: apsw.Connection, session_id: str) -> int:
    """How many turns wait for this session (for status lines and tests)."""
    return int(conn.execute(
        "SELECT count(*) FROM turn_intents t JOIN effects e ON e.effect_id = t.effect_id"
        " WHERE t.target_session_id = ? AND e.status IN ('pending', 'applying')",
        (session_id,)).get)


def confirm_turn(
    conn: apsw.Connection,
    session_id: str,
    turn_intent_id: str,
    entry_id: str,
    lease: Lease,
    now: int,
) -> bool:
    """Settle the turn with the Pi entry id as its receipt (the caller holds the session's
    channel lease). False when it was already settled (a repeated receipt changes nothing);
    KeyError when the turn is not this session's."""
    row = conn.execute(
        "SELECT effect_id FROM turn_intents WHERE turn_intent_id = ? AND target_session_id = ?",
        (turn_intent_id, session_id),
    ).fetchone()
    if row is None:
        raise KeyError(turn_intent_id)
    effect = effects.get(conn, str(row[0]))
    if effect.status is not effects.EffectStatus.PENDING:
        return False
    effect.apply_locally(conn, lease, now, result={"entryId": entry_id})
    return True


def turn_entry(conn: apsw.Connection, turn_intent_id: str) -> str | None:
    """The Pi entry id that received the turn, once it is settled."""
    row = conn.execute(
        "SELECT e.result_hash FROM turn_intents t JOIN effects e ON e.effect_id = t.effect_id"
        " WHERE t.turn_intent_id = ? AND e.status = 'applied'", (turn_intent_id,)).fetchone()
    if row is None or row[0] is None:
        return None
    return str(blobs.get_json(conn, bytes(row[0]))["entryId"])


_ENDED = {"explicit_cancel": "Cancelled by: a cancellation (piw-channels cancel or the run's"
                              " owner), not by a person's answer",
          "expired_no_default": "Expired: its deadline passed and nobody answered"}


def _turn_text(facts: dict[str, Any]) -> str:
    """What the model is told: outcome, choice, the exact text, who answered and where; a
    timeout, a cancellation or an expiry is said to be one (never a person's answer)."""
    title = facts["title"]
    shown = facts.get("fingerprint") or facts["decisionId"]  # the `Decision <fp>` of the card
    lines = [f"[piw-channels] Answer to your question \"{title}\" (decision {shown}):"]
    if facts["outcome"] == "accepted":
        how = {"human": "answered", "timeout_policy": "timed out; the default was taken"}
        lines.append(f"Outcome: accepted ({how.get(facts['provenance'], facts['provenance'])})")
        lines.append(f"Choice: {facts['choice']} ({facts['choiceLabel']})")
        if facts.get("input"):
            lines.append("Text input (exact JSON): "
                         + json.dumps(facts["input"], ensure_ascii=False, sort_keys=True))
        else:
            lines.append("Text input: none")
        if facts.get("channel"):
            lines.append(f"Answered by: a person through the {facts['channel']} channel")
        else:
            lines.append("Decided by: the timeout; nobody answered")
        lines.append("Continue the task with this answer.")
        return "\n".join(lines)
    lines.append(f"Outcome: cancelled ({facts['reason']}); no answer will come")
    lines.append(_ENDED.get(facts["provenance"], f"Decided by: {facts['actor']}"))
    lines.append("Continue the task without this answer.")
    return "\n".join(lines)
