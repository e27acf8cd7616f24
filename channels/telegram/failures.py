"""Failing alone in a poll pass: one profile's pass, one decision's expiry, one inbox row or
one effect that fails becomes one line with its exit code, never an exception that stops the
others (`decisions expire` tells a decision's expiry failure with the same line).

A known error (a configuration, state or decision error) is its own message and exit code; any
other exception is a bug: its traceback goes to a private crash report the line names, and it
exits 1.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from channels.decisions import workflows
from channels.errors import ChannelsError
from state import crashes
from state.database import Database
from state.errors import StateError
from state.exit_codes import ExitCode

__all__ = ["ExpiryFailures", "Failure", "alone", "expire_overdue", "expiry_failure", "failure"]


_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Failure:
    """One thing that failed alone: the line that tells it (no `Error:` prefix), its code."""

    line: str
    exit_code: int
    internal: bool = False  # a bug (with a crash report), not a known error
    cause: str = ""  # the error's class: another cause is another condition to report


def failure(exc: Exception, context: str) -> Failure:
    """The failure `exc` is while doing `context` ("applying the deadline of ...")."""
    code = getattr(exc, "exit_code", None)
    if isinstance(exc, ChannelsError | StateError) and isinstance(code, int) \
            and code != ExitCode.INTERNAL:
        return Failure(str(exc), code, cause=type(exc).__name__)
    return Failure(crashes.report_line(exc, context), ExitCode.INTERNAL, internal=True,
                   cause=type(exc).__name__)


def expiry_failure(decision_id: str, exc: Exception) -> Failure:
    """The failure of one decision whose deadline could not be applied."""
    found = failure(exc, f"applying the deadline of {decision_id}")
    if found.internal:
        return found
    return Failure(f"decision {decision_id}: its deadline cannot be applied: {found.line}",
                   found.exit_code, cause=found.cause)


# Decision id -> why its deadline could not be applied (each reported once per command).
ExpiryFailures = dict[str, Failure]


def expire_overdue(db: Database, owner_id: str, failed: ExpiryFailures) -> None:
    """Apply due deadlines; a decision that fails is noted once in `failed` (the others are
    settled all the same)."""
    for decision_id, exc in workflows.expire_overdue(db, owner_id).failed:
        if decision_id not in failed:
            failed[decision_id] = expiry_failure(decision_id, exc)


async def alone(context: str, failed: Callable[[Failure], _T],
                work: Coroutine[Any, Any, _T]) -> _T:
    """Run `work`, failing alone: what escapes it becomes `failed(its failure)`, and the
    work beside it (another profile's pass) goes on."""
    try:
        return await work
    except Exception as exc:
        return failed(failure(exc, context))
