"""The command line's own error: input that parsed but cannot be used (exit 2)."""

from __future__ import annotations

from state.exit_codes import EXIT_USAGE


class UsageError(ValueError):
    """Bad command-line input detected after parsing (exit 2)."""

    exit_code = EXIT_USAGE
