"""Is the hello's session a real Pi session? What Pi 0.73.1 itself keeps on disk says.

Pi stores a session as `<session dir>/<ISO time>_<session id>.jsonl` (under
`~/.pi/agent/sessions/--<cwd>--/` unless `PI_CODING_AGENT_DIR` or `--session-dir` moves it),
and the file's first line is the header `{"type":"session","id":<session id>,...}`. It
writes nothing before the session's first assistant reply, so a fresh session has only its
name: its folder (made at start) exists and the name ends with `_<session id>.jsonl`. A
session Pi keeps in memory (`--no-session`) has no file at all (`session_file` null), and
only the shape of its id is checked. Pi writes these files; this module only reads them.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass

__all__ = ["check_session"]


_HEADER_BYTES = 65536  # a header is one short line; never read a whole session


@dataclass(frozen=True, slots=True)
class _SessionCheck:
    """How the session was checked (`file`, `unwritten`, `in_memory`), or why it failed."""

    kind: str
    problem: str | None = None


def check_session(session_id: str, session_file: object) -> _SessionCheck:
    """Check `session_file` (the extension's `ctx.sessionManager.getSessionFile()`, or null)
    against `session_id`; never raises."""
    if session_file is None:
        return _SessionCheck("in_memory")
    if not isinstance(session_file, str) or not os.path.isabs(session_file) \
            or not session_file.endswith(".jsonl"):
        return _SessionCheck("file", "hello.session_file is not the absolute path of a Pi"
                            " session file (.jsonl), nor null")
    try:
        found = os.stat(session_file)
    except FileNotFoundError:
        return _unwritten(session_id, session_file)
    except OSError as exc:
        return _SessionCheck("file", f"the Pi session file cannot be read: {exc.strerror}")
    if not stat.S_ISREG(found.st_mode) or found.st_uid != os.getuid():
        return _SessionCheck("file", "the Pi session file is not a regular file of this user")
    return _SessionCheck("file", _header_problem(session_id, session_file))


def _unwritten(session_id: str, session_file: str) -> _SessionCheck:
    folder = os.path.dirname(session_file)
    try:
        found = os.stat(folder)
    except OSError:
        return _SessionCheck("unwritten", "no Pi session file names this session, and its"
                            " folder does not exist")
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        return _SessionCheck("unwritten", "the Pi session folder is not a folder of this user")
    if not os.path.basename(session_file).endswith(f"_{session_id}.jsonl"):
        return _SessionCheck("unwritten", "no Pi session file names this session (a new"
                            " session's file is named <time>_<session id>.jsonl)")
    return _SessionCheck("unwritten")


def _header_problem(session_id: str, session_file: str) -> str | None:
    try:
        with open(session_file, "rb") as handle:
            first = handle.readline(_HEADER_BYTES)
    except OSError as exc:
        return f"the Pi session file cannot be read: {exc.strerror}"
    try:
        header = json.loads(first)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("type") != "session":
        return "the file has no Pi session header"
    if header.get("id") != session_id:
        return "the Pi session file names another session"
    return None
