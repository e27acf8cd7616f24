"""Deliveries of open decisions into Pi sessions, with the session's confirmation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from channels import messages, store
from channels.config.model import ChannelsConfig
from channels.decisions import records, turn_intents
from channels.messages import MessageStatus, Purpose
from channels.pi import notes
from channels.pi.answers import OpenDecision, load_open, open_rows
from channels.pi.sessions import routes_to_pi
from state.errors import WriteRejected
from state.leases import Lease

__all__ = [
    "DELIVERED_CURSOR", "Delivery", "confirm_delivery", "delivery_message_id", "has_work",
    "record_deliveries", "undelivered",
]


DELIVERED_CURSOR = "pi_delivered"


def delivery_message_id(channel_id: str, decision_id: str) -> str:
    """The deterministic delivery message of a decision on a channel."""
    return messages.message_id_for(channel_id, Purpose.DELIVERY, decision_id)


def _delivery_statuses(conn: apsw.Connection, channel_id: str) -> dict[str, str]:
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

    def to_json(self) -> dict[str, Any]:
        """The wire form the session is sent (its `deliver` line)."""
        return {"message_id": self.message_id, **self.decision.to_json()}


def undelivered(
    conn: apsw.Connection,
    channel_id: str,
    session_id: str,
    config: ChannelsConfig | None,
    skip: frozenset[str] = frozenset(),
    *,
    now: int | None = None,
    include_confirmed: bool = False,
) -> list[Delivery]:
    """Open decisions routed to `pi` that this session has not confirmed (and that are not in
    `skip`, the ones this bridge already sent). Only these are loaded and rendered.

    A new bridge asks `include_confirmed`: the extension (after `/reload` or `pi --continue`)
    knows only what its bridge sends, so decisions it already shows must be sent again to be
    answerable; it finds their entries in the session and does not show them twice.
    """
    statuses = _delivery_statuses(conn, channel_id)
    found = []
    for decision_id, audience in open_rows(conn, session_id, now):
        confirmed = statuses.get(decision_id) == "confirmed" and not include_confirmed
        if confirmed or decision_id in skip:
            continue
        if routes_to_pi(config, audience):
            found.append(Delivery(delivery_message_id(channel_id, decision_id),
                                  load_open(conn, decision_id)))
    return found


def has_work(
    conn: apsw.Connection, session_id: str, config: ChannelsConfig | None, now: int, *,
    deliver: bool = True,
) -> bool:
    """Is there anything for this session to show (an open decision routed to `pi`, when
    `deliver`) or to receive (a pending turn, a notification)? Until there is, it needs no
    channel row."""
    if turn_intents.pending_count(conn, session_id) > 0 \
            or notes.pending_count(conn, session_id) > 0:
        return True
    return deliver and any(routes_to_pi(config, audience)
                           for _, audience in open_rows(conn, session_id, now))


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
        if records.resolution_of(conn, item.decision.decision_id) is not None:
            continue
        messages.ensure_message(conn, item.message_id, channel_id, item.decision.decision_id,
                             Purpose.DELIVERY, item.decision.text, now)
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
    message = messages.get_message(conn, message_id)
    if message is None or message.channel_id != channel_id \
            or message.purpose is not Purpose.DELIVERY:
        raise WriteRejected(f"{message_id} is not a delivery of this Pi session")
    message.set_status(conn, MessageStatus.CONFIRMED, now, conversation_ref=session_id,
                       message_ref=entry_id)
    confirmed = messages.delivery_counts(conn, channel_id).get("confirmed", 0)
    store.set_cursor(conn, lease, channel_id, DELIVERED_CURSOR, str(confirmed), now)
    return confirmed
