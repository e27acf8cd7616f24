"""The command line's own errors: input that parsed but cannot be used (exit 2), and SIGTERM
turned into an exception so that cleanup (`finally`) runs as it does for Ctrl-C."""

from __future__ import annotations

from state.exit_codes import ExitCode

__all__ = ["Terminated", "UsageError", "raise_terminated"]


class UsageError(ValueError):
    """Bad command-line input detected after parsing (exit 2)."""

    exit_code = ExitCode.USAGE


class Terminated(BaseException):
    """SIGTERM arrived (a BaseException, like KeyboardInterrupt: no handler swallows it)."""

    exit_code = ExitCode.TERMINATED


def raise_terminated(signum: int, frame: object) -> None:
    """A SIGTERM handler: unwind with `Terminated`."""
    raise Terminated(signum)
