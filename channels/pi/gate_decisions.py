"""A gated call's decision for any agent: granted before, opened now, told afterwards.

    session_grant   this exact input was allowed for the session (no card)
    recent_allow    a person allowed this exact input moments ago (no second card)
    session_grants  what /gate lists as allowed for the session
    open_decision   the card: the whole input, the gate's choices, the policy's deadline
    told            the outcome the agent hears, once the decision is resolved

Pi's bridge (adapters.pi.gatedesk) and the other agents' hooks and MCP server
(adapters.agents.approvals) open and read the gate's decisions through these, so a card, a
grant and what the model is told read the same whichever agent asked. Each function is one
short read or one `create_ask`; none waits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from channels.decisions import context, records, views, workflows
from channels.decisions.choices import text_input
from channels.pi import gating
from channels.pi.gating import GatedCall
from state.database import Database

__all__ = ["Refusal", "open_decision", "recent_allow", "session_grant",
           "session_grants", "told"]


# Pi's choices, but the reason's prompt names no agent (the model of any agent is told).
_ANY_AGENT_CHOICES = {**gating.CHOICES, gating.DENY_REASON: {
    **gating.CHOICES[gating.DENY_REASON],
    "input": text_input(gating.REASON_INPUT, "Why not? (the agent is told)", 1, 500)}}


@dataclass(frozen=True, slots=True)
class _Granted:
    """An earlier decision that allows this call without a card."""

    decision_id: str
    choice: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Refusal:
    """The call is denied before anyone is asked (its input cannot be shown)."""

    message: str


@dataclass(frozen=True, slots=True)
class _Told:
    """A resolved gate decision, as the agent hears it."""

    allow: bool
    message: str
    choice: str | None
    by_person: bool  # a person chose (not a deadline, a cancel or the system)


def session_grant(db: Database, session_id: str, call: GatedCall) -> _Granted | None:
    """The first decision of this session that allowed exactly `call` for the session."""
    prefix = gating.subject_prefix(session_id, call)

    def first(conn: apsw.Connection) -> _Granted | None:
        found = views.accepted_with_subject(conn, prefix, call.subject_hash,
                                            gating.ALLOW_SESSION)
        if not found:
            return None
        return _Granted(found[0], gating.ALLOW_SESSION, views.fingerprint_of(conn, found[0]))

    return db.read(first)


def recent_allow(db: Database, session_id: str, call: GatedCall, since_ms: int
                 ) -> _Granted | None:
    """The newest decision of this session in which a person allowed exactly `call` (once or
    for the session) at or after `since_ms`."""
    prefix = gating.subject_prefix(session_id, call)

    def newest(conn: apsw.Connection) -> _Granted | None:
        for choice in gating.ALLOWING:
            for decision_id in reversed(views.accepted_with_subject(
                    conn, prefix, call.subject_hash, choice)):
                decided = records.resolution_of(conn, decision_id)
                if decided is not None and decided.provenance == "human" \
                        and decided.resolved_at >= since_ms:
                    return _Granted(decision_id, choice, views.fingerprint_of(conn, decision_id))
        return None

    return db.read(newest)


def session_grants(db: Database, session_id: str) -> list[str]:
    """Each input allowed for the session, one line each: tool, input, where, decision."""
    found = db.read(lambda c: [
        (views.fingerprint_of(c, d), subject) for d, subject in views.accepted_subjects(
            c, gating.session_prefix(session_id), gating.ALLOW_SESSION)])
    return [f"{subject['tool']}: {_one_line(_shown(subject))}"
            f" (in {subject['cwd']}, decision {fingerprint})" for fingerprint, subject in found]


def open_decision(db: Database, call: GatedCall, *, shown: GatedCall, rule: str | None,
                  audience: str, timeout_minutes: float, session_id: str, session_label: str,
                  owner_id: str, agent_is_pi: bool) -> workflows.AskHandle | Refusal:
    """Open the decision about `call` (what the subject binds: the exact input that will run),
    its card showing `shown` (the call in the policy's terms), in a gate run of the session,
    denied by default when `timeout_minutes` pass."""
    cwd = Path(call.cwd)
    where = context.automatic(cwd, session_label)
    try:
        presentation = gating.presentation(shown, rule, where)
    except gating.TooLong as exc:
        return Refusal(f"Denied without asking: {exc}; split it into smaller steps")
    spec = workflows.AskSpec(
        title=gating.title(shown), presentation=presentation,
        choices=gating.CHOICES if agent_is_pi else _ANY_AGENT_CHOICES,
        audience=audience, timeout_ms=int(timeout_minutes * 60_000),
        default_choice=gating.DENY, origin_session_id=session_id, subject=call.subject,
        workflow=workflows.GATE_WORKFLOW,
        run_id=gating.run_id(session_id, call, db.entropy.token_bytes(8).hex()))
    return workflows.create_ask(db, spec, owner_id)


def told(db: Database, decision_id: str, timeout_minutes: float,
         reasons: Mapping[str, str] | None = None) -> _Told | None:
    """What the agent is told of the decision, None while it is open; `reasons` rewords a
    cancel's reason for the model (Pi's "you pressed Escape")."""
    decided = db.read(lambda c: records.resolution_of(c, decision_id))
    if decided is None:
        return None
    channel, terminal = db.read(lambda c: views.winner_source(c, decision_id))
    entered = (decided.response or {}).get("input") or {}
    reason = (reasons or {}).get(decided.reason or "", decided.reason)
    text = gating.outcome_text(decided.outcome, decided.provenance, decided.choice,
                               entered.get(gating.REASON_INPUT),
                               gating.where_answered(channel, terminal), reason,
                               timeout_minutes)
    allow = decided.outcome == records.Outcome.ACCEPTED and decided.choice in gating.ALLOWING
    return _Told(allow, text, decided.choice, decided.provenance == "human")


def _one_line(text: str, limit: int = 120) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _shown(subject: dict[str, Any]) -> str:
    return gating.shown_input(GatedCall(str(subject["tool"]), subject["input"],
                                        str(subject["cwd"])))
