"""Crash reports: the traceback of an internal error, kept in a private file.

An internal error (a bug) is told in one line that names its report; the report itself is a
0600 file under the workflows directory (beside the database), so nothing that hit a bug is
silent and the line stays short enough for cron mail. Anything shaped like a bot token is
scrubbed from the report before it is written.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
import time
import traceback
from pathlib import Path
from typing import Final

from state.files import default_path, make_private_dir
from state.version import VERSION

__all__ = ["format_report", "report_line"]


_PREFIX: Final = "piw-channels-crash-"
# The Bot API token shape (<bot id>:<secret>), wherever it stands (a request URL has it right
# after "bot"); a crash must not copy one into a file.
_TOKEN_SHAPE: Final = re.compile(r"[0-9]{5,}:[A-Za-z0-9_-]{20,}")


def _crash_directory() -> Path:
    """Where crash reports go: the workflows directory of the state database."""
    return default_path().parent


def _scrub(text: str) -> str:
    """Replace anything shaped like a bot token with <redacted>."""
    return _TOKEN_SHAPE.sub("<redacted>", text)


def format_report(exc: BaseException, context: str) -> str:
    """The report's text: what was being done, the version and command, the traceback."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    lines = [f"piw-channels {VERSION} internal error at {stamp}",
             f"while: {context}",
             f"command: {' '.join(sys.argv[1:]) or '(library call)'}",
             "", *traceback.format_exception(exc)]
    return _scrub("\n".join(line.rstrip("\n") for line in lines) + "\n")


def _write_report(exc: BaseException, context: str, directory: Path | None = None) -> Path:
    """Write a new private (0600) report of `exc`; return its path. OSError when it cannot
    be written (the caller then says so in its one line)."""
    where = directory or _crash_directory()
    make_private_dir(where)
    name = f"{_PREFIX}{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}-" \
        f"{secrets.token_hex(3)}.txt"
    path = where / name
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        os.fchmod(fd, 0o600)  # O_CREAT honours the umask: the mode must be exact
        os.write(fd, format_report(exc, context).encode("utf-8", "replace"))
    finally:
        os.close(fd)
    return path


def report_line(exc: BaseException, context: str, directory: Path | None = None) -> str:
    """One line about an internal error, naming its report (or why none could be written)."""
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    what = _scrub(what)[:200]
    try:
        path = _write_report(exc, context, directory)
    except OSError as failure:
        return f"internal error while {context}: {what} (no crash report: {failure.strerror})"
    return f"internal error while {context}: {what}; crash report: {path}"
