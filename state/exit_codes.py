"""The exit codes of every command, defined once (sysexits.h where one fits; README table)."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ExitCode"]


class ExitCode(IntEnum):
    """A command's exit status; an int everywhere an int is wanted (`sys.exit`, `%d`, JSON)."""

    OK = 0
    INTERNAL = 1  # a bug: report it
    USAGE = 2  # bad arguments
    NOT_ACCEPTED = 3  # `ask --wait`: the decision ended without being accepted
    INCOMPATIBLE = 65  # incompatible or corrupt database (EX_DATAERR)
    IO_ERROR = 74  # the disk failed a read or write of the database (EX_IOERR)
    TEMPORARY = 75  # may recover by itself: cron tries again (EX_TEMPFAIL)
    PERMISSION = 77  # EX_NOPERM
    CONFIG = 78  # invalid configuration (EX_CONFIG)
    INTERRUPTED = 130  # Ctrl-C
    BROKEN_PIPE = 141  # the output's reader went away (`| head`), as SIGPIPE would
    TERMINATED = 143  # SIGTERM (after cleaning up, like Ctrl-C)

    @property
    def meaning(self) -> str:
        """What the code means, in a few words (the top-level --help lists them all)."""
        return _MEANINGS[self]


_MEANINGS = {
    ExitCode.OK: "ok",
    ExitCode.INTERNAL: "internal error",
    ExitCode.USAGE: "usage",
    ExitCode.NOT_ACCEPTED: "`ask --wait`: not accepted",
    ExitCode.INCOMPATIBLE: "incompatible or corrupt database",
    ExitCode.IO_ERROR: "disk I/O error",
    ExitCode.TEMPORARY: "temporary condition (try again)",
    ExitCode.PERMISSION: "permission problem",
    ExitCode.CONFIG: "invalid configuration",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
    ExitCode.BROKEN_PIPE: "output closed",
    ExitCode.TERMINATED: "terminated (SIGTERM)",
}
