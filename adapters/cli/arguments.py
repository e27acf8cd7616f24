"""Argument conventions shared by the command groups."""

from __future__ import annotations

__all__ = ["DECISION_ID_HELP"]


# The help of every DECISION_ID argument (show, cancel, resend, pi show, pi answer).
DECISION_ID_HELP = ("decision id, or its Decision fingerprint (a unique prefix of either is"
                    " enough)")
