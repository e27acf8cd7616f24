"""The lines the bridge sends for a delivery and a settlement (pure: an item in, a line out)."""

from __future__ import annotations

from typing import Any

from channels.pi.deliveries import Delivery
from channels.pi.settle_view import Settlement

__all__ = ["deliver_message", "settle_message"]


def deliver_message(item: Delivery) -> dict[str, Any]:
    """The `deliver` line of one decision."""
    decision = item.decision.to_json()
    return {"type": "deliver", "message_id": item.message_id, **decision}


def settle_message(item: Settlement) -> dict[str, Any]:
    """The `settle` line of one resolved decision."""
    return {"type": "settle", "decision_id": item.decision_id, "outcome": item.outcome,
            "provenance": item.provenance, "text": item.text, "title": item.title,
            "channel": item.channel, "terminal": item.terminal}
