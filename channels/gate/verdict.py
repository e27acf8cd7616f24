"""The judgement on one tool call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["ALLOW", "Judgement", "block"]


@dataclass(frozen=True)
class Judgement:
    """What to do with one tool call: run it, ask a person, or refuse it."""

    action: Literal["allow", "ask", "block"]
    reason: str  # one plain line: for the model when blocked, shown on the card when asked
    rule: str | None  # e.g. "bash: git push", "path: .env*", "guard: state database"


ALLOW: Final = Judgement("allow", "no rule matches this call", None)


def block(reason: str, rule: str) -> Judgement:
    return Judgement("block", reason, rule)
