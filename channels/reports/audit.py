"""The approval audit: every decision asked or resolved since a time, across every agent and
channel, with who asked (agent, host), who answered and how, and what was asked (its request
digest binds the exact input).

Read from what the decisions and channels already record: the request, the resolution, and
for an answer on Telegram the inbox row it came in (the name Telegram showed). Reads only,
on the caller's connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import apsw

from channels import inbox
from channels.decisions import history, records
from channels.store import telegram_channel_id

__all__ = ["AuditRow", "audit", "row"]


# The resolution's provenance, as the audit says it.
_PROVENANCE: Final = {"human": "human", "timeout_policy": "timeout",
                      "explicit_cancel": "cancel", "expired_no_default": "expired"}


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One decision as the audit lists it."""

    decision_id: str
    agent: str
    host: str
    title: str
    audience: str
    asked_at: int
    resolved_at: int | None
    outcome: str  # open | accepted | cancelled
    choice: str | None
    choice_label: str | None
    provenance: str | None  # human | timeout | cancel | expired (None: open)
    who: str | None  # the answering actor: telegram-user:<id>, a Pi session, local:<uid>
    who_name: str | None  # the name Telegram showed, or "pi terminal"
    channel: str | None  # telegram:<profile>, pi:local, ...
    request_digest: str
    subject_digest: str
    reason: str | None  # a cancellation's

    def to_json(self) -> dict[str, Any]:
        return {
            "decision_id": self.decision_id, "agent": self.agent, "host": self.host,
            "title": self.title, "audience": self.audience, "asked_at": self.asked_at,
            "resolved_at": self.resolved_at, "outcome": self.outcome, "choice": self.choice,
            "choice_label": self.choice_label, "provenance": self.provenance, "who": self.who,
            "who_name": self.who_name, "channel": self.channel,
            "request_digest": self.request_digest, "subject_digest": self.subject_digest,
            "reason": self.reason,
        }


def audit(conn: apsw.Connection, since: int) -> list[AuditRow]:
    """Every decision asked or resolved at or after `since` (epoch ms), oldest first."""
    return [row(conn, decision_id) for decision_id in records.decisions_since(conn, since)]


def row(conn: apsw.Connection, decision_id: str) -> AuditRow:
    decision = records.load(conn, decision_id)
    request = decision.request
    asker = decision.asker()
    resolution = records.resolution_of(conn, decision_id)
    won = history.winner(conn, decision_id)
    choice = None if resolution is None else resolution.choice
    found = request.choices.get(choice or "")
    who = None if won is None else won.actor_id
    return AuditRow(
        decision_id=decision_id, agent=asker.agent, host=asker.host,
        title=str(request.document["title"]), audience=decision.audience,
        asked_at=decision.created_at, resolved_at=None if won is None else won.resolved_at,
        outcome="open" if won is None else won.outcome, choice=choice,
        choice_label=None if found is None else str(found["label"]),
        provenance=None if won is None else _PROVENANCE.get(won.provenance, won.provenance),
        who=who, who_name=None if won is None else _name(conn, won),
        channel=None if won is None else won.channel,
        request_digest=request.request_digest, subject_digest=request.subject_digest,
        reason=None if resolution is None else resolution.reason)


def _name(conn: apsw.Connection, won: history.Winner) -> str | None:
    """The answerer's name: as Telegram showed it with the press or reply (its inbox row),
    or the Pi terminal; None when no person answered or the name is not known."""
    if won.provenance != "human" or won.channel is None:
        return None
    if won.channel.startswith("pi"):
        return "pi terminal" if (won.actor_id or "").startswith("local:") else "pi session"
    event = won.event_id
    if not won.channel.startswith("telegram:") or event is None:
        return None
    row = inbox.get_inbox(conn, telegram_channel_id(won.channel.removeprefix("telegram:")),
                          event)
    name = None if row is None else row.payload.get("userFullName")
    return name if isinstance(name, str) and name else None
