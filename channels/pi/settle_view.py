"""Settling a Pi session's view of a decision once it is resolved (`pi.settle` effects)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import apsw

from channels import store
from channels.decisions import records, views
from state import effects
from state.clock import Entropy
from state.effects import Attempt, AttemptOutcome, Effect
from state.leases import Lease, OwnerType
from state.resources import Actor, ActorType

__all__ = [
    "SETTLE_EFFECT", "Settlement", "begin_settlement", "due_settlements", "finish_settlement",
    "recover_settlements",
]


SETTLE_EFFECT = "pi.settle"


@dataclass(frozen=True, slots=True)
class Settlement:
    """A due `pi.settle` effect of one channel with what the extension is told."""

    effect_id: str
    decision_id: str
    outcome: str
    provenance: str
    text: str
    title: str = ""
    channel: str | None = None  # the channel of a person's winning answer
    terminal: bool = False  # that answer came from the terminal operator view (`local:<uid>`)

    def to_json(self) -> dict[str, Any]:
        """The wire form the session is sent (its `settle` line)."""
        return {"decision_id": self.decision_id, "outcome": self.outcome,
                "provenance": self.provenance, "text": self.text, "title": self.title,
                "channel": self.channel, "terminal": self.terminal}


def _keys(channel_id: str) -> tuple[str, str]:
    """A settlement's key on this channel: the short one, or an earlier version's."""
    return effects.scoped_key(channel_id), channel_id


def due_settlements(conn: apsw.Connection, channel_id: str, now: int) -> list[Settlement]:
    """Pending `pi.settle` effects of this channel (keyed by it: `effects.scoped_key`)."""
    found = []
    for effect in effects.list_due(conn, [SETTLE_EFFECT], now):
        if effect.idempotency_key not in _keys(channel_id):
            continue
        body = effect.payload(conn)
        decision_id = str(body["decisionId"])
        channel, terminal = views.winner_source(conn, decision_id)
        found.append(Settlement(effect.effect_id, decision_id, str(body["outcome"]),
                                str(body["provenance"]), str(body["text"]),
                                title=records.load(conn, decision_id).request.document["title"],
                                channel=channel, terminal=terminal))
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
    effect = effects.get(conn, effect_id)
    return effect.begin_attempt(conn, OwnerType.CHANNEL, lease.owner_id, now, entropy)


def finish_settlement(conn: apsw.Connection, attempt: Attempt, sent: bool, now: int) -> Effect:
    """Settle as applied, or, when the line provably was not written (the pipe was closed),
    make it pending again for the next bridge of this session."""
    if sent:
        return attempt.finish(conn, AttemptOutcome.APPLIED, now)
    return attempt.finish(conn, AttemptOutcome.REJECTED, now,
                          error={"pipe": "closed"}, retry_at=now)


def recover_settlements(conn: apsw.Connection, lease: Lease, channel_id: str, now: int) -> int:
    """Attempts left `applying` by a dead bridge of this channel become pending again.

    A repeated `settle` is harmless (the extension only shows the outcome again), so an
    interrupted attempt is retried instead of being left ambiguous.
    """
    store.verify(conn, lease, channel_id, now)
    actor = Actor(ActorType.CHANNEL, lease.owner_id)
    count = 0
    for effect in effects.abandoned(conn, [SETTLE_EFFECT], now):
        if effect.idempotency_key in _keys(channel_id):
            effect.interrupt(conn, actor, now, provably_unsent=True)
            count += 1
    return count
