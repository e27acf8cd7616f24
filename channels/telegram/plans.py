"""What one Telegram effect attempt is about to send: a delivery (the card's parts to each
recipient) or a settlement (keyboards to remove, outcome posts), computed before the sends."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from channels.telegram import outcomes
from channels.telegram.documents import Part

__all__ = ["Delivery", "Settlement"]


@dataclass(frozen=True, slots=True)
class Settlement:
    decision_id: str
    message_id: str
    post: outcomes.Styled
    keyboards: list[tuple[str, str]]  # (chat, message) of each keyboard to settle
    markup: dict[str, Any]  # what each keeps: the chosen button marked, every button inert
    # (recipient, chat, card message or None) of each outcome post, intent written
    posts: list[tuple[int, str, str | None]]
    # (chat, message) of each keyboard an earlier attempt removed (not edited again)
    removed: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Delivery:
    decision_id: str
    message_id: str
    parts: list[Part]  # the card's messages, and its attached file if it has one
    markup: dict[str, Any]
    recipients: list[str]
    resend: bool
    only: str | None  # a copy of the card for this chat alone
