"""The Pi side of deferred turns: a session's bridge confirms the turns it delivered, under
its channel lease. The rows themselves belong to `channels.decisions.turn_intents`.
"""

from __future__ import annotations

import apsw

from channels import store
from channels.decisions import turn_intents
from state.leases import Lease

__all__ = ["confirm_turn"]


def confirm_turn(
    conn: apsw.Connection,
    lease: Lease,
    channel_id: str,
    session_id: str,
    turn_intent_id: str,
    entry_id: str,
    now: int,
) -> bool:
    """Settle the turn with the Pi entry id as its receipt (the session's channel owner only).
    False when it was already settled (a repeated receipt changes nothing); KeyError when the
    turn is not this session's."""
    store.verify(conn, lease, channel_id, now)
    return turn_intents.confirm_turn(conn, session_id, turn_intent_id, entry_id, lease, now)
