"""A card's attached file: the whole input of a gated tool call too long for the card's parts.

`channels/pi/gating` decides when an input is attached (its card then shows the first lines and
says what is attached); the file is derived again from the decision's subject, the exact input
the subject digest binds, so what is uploaded is always what the person is asked about. It is
one more part of the card's delivery, sent with `sendDocument` just before the last part (the
keyboard stays on the last text part) and silent (the card's first part notifies): the same
intent row, confirmation and ambiguity as any part, never re-sent blindly. Pure, except `send`,
which hands a part to the Bot API seam.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from channels.decisions.presentation import fingerprint
from channels.decisions.request import DecisionRequest
from channels.pi import gating
from channels.telegram.card import CardPart
from channels.telegram.transport import BotApi, ProviderResult

__all__ = ["Part", "attachment_of", "document_part", "send", "with_document"]


@dataclass(frozen=True, slots=True)
class _DocumentPart:
    """The attached file as a part of a card: `text` is what the part's intent row records
    (the caption, the file's name and its SHA-256), `caption` what the chat shows."""

    name: str
    data: bytes
    caption: str
    text: str
    silent: bool = True
    last: bool = False  # never carries the keyboard
    entities: tuple[dict[str, Any], ...] = ()


Part = CardPart | _DocumentPart


def attachment_of(request: DecisionRequest) -> gating.Attachment | None:
    """The file a decision's card attaches, or None (only gated Pi tool calls attach one)."""
    subject = request.document.get("subject")
    if not (isinstance(subject, Mapping) and subject.get("kind") == "pi.tool_call"):
        return None
    tool, data, cwd = subject.get("tool"), subject.get("input"), subject.get("cwd")
    if not (isinstance(tool, str) and isinstance(data, Mapping) and isinstance(cwd, str)):
        return None
    return gating.GatedCall(tool, data, cwd).attachment()


def document_part(attached: gating.Attachment, channel_request: Mapping[str, Any]) -> _DocumentPart:
    """The part that uploads `attached`, its caption naming it and the decision."""
    shown = fingerprint(str(channel_request["presentationDigest"]))
    caption = f"{attached.describe()}: the whole input of decision {shown}"
    digest = hashlib.sha256(attached.data).hexdigest()
    return _DocumentPart(attached.name, attached.data, caption,
                        f"{caption}\nsendDocument {attached.name} sha256:{digest}")


def with_document(parts: Sequence[CardPart], document: _DocumentPart | None) -> list[Part]:
    """The card's parts with the document just before the last one (none: the parts)."""
    if document is None:
        return list(parts)
    return [*parts[:-1], document, *parts[-1:]]


async def send(api: BotApi, chat: str, part: Part, markup: Mapping[str, Any] | None,
               deadline: float) -> tuple[str, ProviderResult]:
    """Send one part (a message, or the file); (Bot API method, result)."""
    if isinstance(part, _DocumentPart):
        return "sendDocument", await api.send_document(
            chat, part.name, part.data, caption=part.caption, disable_notification=part.silent,
            deadline=deadline)
    return "sendMessage", await api.send_message(
        chat, part.text, markup, entities=part.entities, disable_notification=part.silent,
        deadline=deadline)
