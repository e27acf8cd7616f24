"""Errors of human decisions: a value that breaks the decision contract, a change the
decision's state refuses. Messages follow the reference contract word for word.

    ChannelsError (channels.errors)
    └── DecisionError (ValueError)     decision_error
        ├── InvalidDigest              invalid_digest
        ├── InvalidRequest             invalid_request
        │   └── InvalidPresentation    invalid_presentation
        ├── IncompatibleRequest        incompatible_request
        ├── InvalidResponse            invalid_response
        ├── StaleAnswer                stale_answer
        ├── ExpiredRequest             expired_request
        └── TooManyParts               too_many_parts
    DecisionRefused (state WriteRejected)  decision_refused
    └── UnknownDecision                unknown_decision
"""

from __future__ import annotations

from typing import ClassVar

from channels.errors import ChannelsError
from state.errors import WriteRejected
from state.exit_codes import ExitCode

__all__ = [
    "DecisionError", "DecisionRefused", "ExpiredRequest", "IncompatibleRequest",
    "InvalidDigest", "InvalidPresentation", "InvalidRequest", "InvalidResponse", "StaleAnswer",
    "TooManyParts", "UnknownDecision",
]


class DecisionError(ChannelsError, ValueError):
    """A human decision value breaks the decision contract."""

    code: ClassVar[str] = "decision_error"
    exit_code: ClassVar[int] = 2  # invalid input from the caller: a usage error


class InvalidDigest(DecisionError):
    """A digest string is not `sha256:` followed by 64 lowercase hex digits."""

    code: ClassVar[str] = "invalid_digest"


class InvalidRequest(DecisionError):
    """A decision request cannot be created from the given values."""

    code: ClassVar[str] = "invalid_request"


class InvalidPresentation(InvalidRequest):
    """A decision presentation breaks the presentation schema or its limits."""

    code: ClassVar[str] = "invalid_presentation"


class IncompatibleRequest(DecisionError):
    """A stored request document does not match its own digests or contract."""

    code: ClassVar[str] = "incompatible_request"


class InvalidResponse(DecisionError):
    """A response names no available choice or carries invalid input."""

    code: ClassVar[str] = "invalid_response"


class StaleAnswer(DecisionError):
    """An answer names another decision or an older request digest."""

    code: ClassVar[str] = "stale_answer"


class ExpiredRequest(DecisionError):
    """An answer arrived at or after the request's expiry."""

    code: ClassVar[str] = "expired_request"


class TooManyParts(DecisionError):
    """A presentation renders as more Telegram parts than the limit allows."""

    code: ClassVar[str] = "too_many_parts"


class DecisionRefused(WriteRejected):
    """The decision's current state does not allow this change (nothing was written)."""

    code: ClassVar[str] = "decision_refused"
    exit_code = ExitCode.USAGE


class UnknownDecision(DecisionRefused):
    """No decision (or no unique decision) has this id or prefix."""

    code: ClassVar[str] = "unknown_decision"
