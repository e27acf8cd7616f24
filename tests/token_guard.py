"""The suite-wide token-leak guard: what the tests and their child processes wrote and printed.

Every test token has the Bot API shape `<digits>:<secret>`. The guard keeps what matches it
in: the log records of this process (at DEBUG, all loggers), the stdout and stderr of every
child process a test waited for (`Popen.communicate`, which `subprocess.run` uses too), and,
at the end of the session, every file under the session's temporary directory: databases,
crash reports, config files, and whatever else a child wrote there. Token files themselves
(a `*.token` file, or one holding only a token) are where a token belongs.
"""

from __future__ import annotations

import logging
import re
import subprocess
from pathlib import Path
from typing import Any

TOKEN_SHAPE = re.compile(rb"(?<![A-Za-z0-9_-])[0-9]{5,}:[A-Za-z0-9_-]{20,}")
# Also right after "bot" (in a URL), but not inside a longer word: a Pi session id ends in
# hex digits, and "<session id>:notification-..." is a key, not a token.
ANY_TOKEN_SHAPE = re.compile(
    rb"(?:(?<![A-Za-z0-9_-])|(?<=bot))[0-9]{5,}:[A-Za-z0-9_-]{20,}")


class Recorder(logging.Handler):
    """Log records of this process that hold a token."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.leaks: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a broken record must not break the test it came from
            text = str(record.msg)
        if record.exc_text:
            text += record.exc_text
        if TOKEN_SHAPE.search(text.encode("utf-8", "replace")):
            self.leaks.append(f"{record.name}: {text[:200]}")


CHILD_LEAKS: list[str] = []
_communicate = subprocess.Popen.communicate


def _as_bytes(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    return str(data).encode("utf-8", "surrogateescape") if data else b""


def scan_output(args: Any, out: Any, err: Any) -> None:
    """Record a token in what a run printed (a child's, or a run in this process)."""
    for name, data in (("stdout", out), ("stderr", err)):
        if ANY_TOKEN_SHAPE.search(_as_bytes(data)):
            CHILD_LEAKS.append(f"the {name} of child {str(args)[:160]}")


def _scanned_communicate(self: subprocess.Popen[Any], *args: Any,
                         **kwargs: Any) -> tuple[Any, Any]:
    out, err = _communicate(self, *args, **kwargs)
    scan_output(self.args, out, err)
    return out, err


def watch_children() -> None:
    """Scan the output of every child process the tests wait for."""
    subprocess.Popen.communicate = _scanned_communicate  # type: ignore[method-assign]


def is_token_file(path: Path, data: bytes) -> bool:
    """A file meant to hold a token: named so, or holding nothing else (a test's own)."""
    return path.suffix == ".token" or TOKEN_SHAPE.fullmatch(data.strip()) is not None


def file_leaks(base: Path) -> list[str]:
    """Every file under `base`, token files aside, that holds something of a token's shape."""
    leaks = []
    for path in base.rglob("*"):
        try:
            if not path.is_file() or path.is_symlink():
                continue
            data = path.read_bytes()
        except OSError:  # gone meanwhile, or a mode a test set on purpose
            continue
        if not is_token_file(path, data) and ANY_TOKEN_SHAPE.search(data):
            leaks.append(f"file {path}")
    return leaks
