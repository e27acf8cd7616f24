"""The exit codes of every command, defined once (sysexits.h where one fits; README table)."""

from __future__ import annotations

from typing import Final

__all__ = [
    "EXIT_BROKEN_PIPE", "EXIT_CONFIG", "EXIT_INCOMPATIBLE", "EXIT_INTERNAL",
    "EXIT_INTERRUPTED", "EXIT_IO_ERROR", "EXIT_NOT_ACCEPTED", "EXIT_OK", "EXIT_PERMISSION",
    "EXIT_TEMPORARY", "EXIT_TERMINATED", "EXIT_USAGE", "MEANINGS",
]


EXIT_OK: Final = 0
EXIT_INTERNAL: Final = 1  # a bug: report it
EXIT_USAGE: Final = 2  # bad arguments
EXIT_NOT_ACCEPTED: Final = 3  # `ask --wait`: the decision ended without being accepted
EXIT_INCOMPATIBLE: Final = 65  # incompatible or corrupt database (EX_DATAERR)
EXIT_IO_ERROR: Final = 74  # the disk failed a read or write of the database (EX_IOERR)
EXIT_TEMPORARY: Final = 75  # may recover by itself: cron tries again (EX_TEMPFAIL)
EXIT_PERMISSION: Final = 77  # EX_NOPERM
EXIT_CONFIG: Final = 78  # invalid configuration (EX_CONFIG)
EXIT_INTERRUPTED: Final = 130  # Ctrl-C
EXIT_BROKEN_PIPE: Final = 141  # the output's reader went away (`| head`), as SIGPIPE would
EXIT_TERMINATED: Final = 143  # SIGTERM (after cleaning up, like Ctrl-C)

# What each code means, in a few words (the top-level --help lists them all).
MEANINGS: Final = {
    EXIT_OK: "ok",
    EXIT_INTERNAL: "internal error",
    EXIT_USAGE: "usage",
    EXIT_NOT_ACCEPTED: "`ask --wait`: not accepted",
    EXIT_INCOMPATIBLE: "incompatible or corrupt database",
    EXIT_IO_ERROR: "disk I/O error",
    EXIT_TEMPORARY: "temporary condition (try again)",
    EXIT_PERMISSION: "permission problem",
    EXIT_CONFIG: "invalid configuration",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
    EXIT_BROKEN_PIPE: "output closed",
    EXIT_TERMINATED: "terminated (SIGTERM)",
}
