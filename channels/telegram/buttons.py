"""Inline buttons: callback tokens (`piw:` + 24 hex), the keyboard, and the index that maps a
pressed token back to its decision and choice.
"""

from __future__ import annotations

import re
from typing import Any

import apsw

from channels.decisions import views
from channels.decisions.digests import text_sha256_hex
from channels.decisions.request import DecisionRequest

__all__ = [
    "SETTLED_RE", "SETTLE_EFFECT", "TOKEN_RE", "ButtonIndex", "callback_token", "keyboard",
    "live_token", "settled_keyboard",
]


_CALLBACK_TOKEN_PREFIX = "piw:"


def callback_token(decision_id: str, request_digest: str, choice_id: str) -> str:
    """The 28-character Telegram callback_data for one choice of one request."""
    digest = text_sha256_hex(f"{decision_id}\0{request_digest}\0{choice_id}")
    return _CALLBACK_TOKEN_PREFIX + digest[:24]


TOKEN_RE = re.compile(r"piw:[0-9a-f]{24}")
# A settled card's buttons: the same token under another prefix, so a press still names its
# decision (to say how it was decided) and can never be taken for an answer.
_SETTLED_PREFIX = "piwx:"
SETTLED_RE = re.compile(r"piwx:[0-9a-f]{24}")
_CHOSEN_MARK = "✓ "

SETTLE_EFFECT = "telegram.settle"  # the effect that removes a decision's keyboards
_RECENT_MS = 7 * 24 * 3600 * 1000  # presses on decisions resolved this long ago are unknown


class ButtonIndex:
    """callback_data token -> (decision, choice) for decisions this channel presented.

    Tokens are derived from immutable request data, so the index is only ever extended.
    """

    def __init__(self) -> None:
        self._tokens: dict[str, tuple[str, str]] = {}
        self._known: set[str] = set()

    def add(self, request: DecisionRequest) -> None:
        self._add(request.decision_id, request.request_digest, list(request.choices))

    def _add(self, decision_id: str, request_digest: str, choice_ids: list[str]) -> None:
        if decision_id in self._known:
            return
        self._known.add(decision_id)
        for choice_id in choice_ids:
            token = callback_token(decision_id, request_digest, choice_id)
            self._tokens[token] = (decision_id, choice_id)

    def _add_all(self, basis: list[tuple[str, str, list[str]]]) -> None:
        for decision_id, digest, choice_ids in basis:
            self._add(decision_id, digest, choice_ids)

    def find(self, conn: apsw.Connection, channel_id: str, token: str, now: int,
             chat: str | None = None, message_ref: str | None = None) -> tuple[str, str] | None:
        """Look a token up. On a miss, read the decision of the pressed message (an indexed
        lookup by its references; decisions resolved more than RECENT_MS ago are left out: a
        press on one is an unknown button, its keyboard was removed long ago), then those
        whose keyboard may still show here (open, or resolved and not yet settled: a message
        whose references were never recorded, or a token from another message). Neither
        reads the history of settled decisions."""
        found = self._tokens.get(token)
        if found is not None:
            return found
        for basis in views.button_bases(conn, channel_id, SETTLE_EFFECT, chat=chat,
                                        message_ref=message_ref,
                                        resolved_since=now - _RECENT_MS):
            self._add_all(basis)
            found = self._tokens.get(token)
            if found is not None:
                break
        return found


def keyboard(request: DecisionRequest) -> dict[str, Any]:
    """One row per choice: the label and its callback token."""
    return {"inline_keyboard": [
        [{"text": choice["label"],
          "callback_data": callback_token(request.decision_id, request.request_digest, cid)}]
        for cid, choice in request.choices.items()
    ]}


def settled_keyboard(request: DecisionRequest, chosen: str | None) -> dict[str, Any]:
    """The keyboard a settled card keeps: the chosen button marked ("✓ Continue"), every
    button inert (its data a settled token: a press is answered "already decided")."""
    return {"inline_keyboard": [
        [{"text": (_CHOSEN_MARK if cid == chosen else "") + choice["label"],
          "callback_data": _SETTLED_PREFIX + callback_token(
              request.decision_id, request.request_digest, cid).removeprefix(
              _CALLBACK_TOKEN_PREFIX)}]
        for cid, choice in request.choices.items()
    ]}


def live_token(settled: str) -> str:
    """The live token a settled button's data was made from."""
    return _CALLBACK_TOKEN_PREFIX + settled.removeprefix(_SETTLED_PREFIX)
