"""D5: a hello must name a Pi session that Pi really has (its session file, see
adapters/pi/session_file.py), not only a secret from the parent and a UUID-shaped id.

The bridge here has a valid secret from its parent (the strongest forger: a same-user program
that spawns a bridge the way the extension does), so only the session check can refuse it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from channels import inbox
from channels.decisions import records
from channels.decisions.workflows import AskHandle
from channels.pi import sessions
from state.database import Database
from tests.adapters.pi.helpers import SESSION, BridgeProcess, ask
from tests.adapters.pi.test_bridge import assert_nothing_recorded

OTHER = "0b6f7a52-9c1e-4c55-8f6e-2f4b1c9d7e99"
Make = Callable[[Path], object]


@pytest.fixture
def decision(db: Database) -> AskHandle:
    return ask(db)


def header(session_id: str) -> str:
    return json.dumps({"type": "session", "version": 3, "id": session_id,
                       "timestamp": "2026-12-01T09:00:00.000Z", "cwd": "/work"}) + "\n"


def session_file(folder: Path, session_id: str = SESSION, text: str | None = None) -> Path:
    """A session file as Pi names and starts it (`<time>_<id>.jsonl`, header first)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"2026-12-01T09-00-00-000Z_{session_id}.jsonl"
    path.write_text(header(session_id) if text is None else text)
    return path


def foreign_owner(folder: Path) -> object:
    path = session_file(folder)
    os.chown(path, 4242, 4242)
    return str(path)


def a_folder(folder: Path) -> object:
    path = folder / f"2026-12-01T09-00-00-000Z_{SESSION}.jsonl"
    path.mkdir(parents=True)
    return str(path)


FORGED: dict[str, tuple[Make, str]] = {
    "another session's file": (lambda d: str(session_file(d, OTHER).rename(
        d / f"x_{SESSION}.jsonl")), "the Pi session file names another session"),
    "no file, no folder": (lambda d: str(d / "nowhere" / f"x_{SESSION}.jsonl"),
                           "no Pi session file names this session, and its folder does not"
                           " exist"),
    "no file under another name": (lambda d: (d.mkdir(), str(d / "made-up.jsonl"))[1],
                                   "no Pi session file names this session (a new session's"
                                   " file is named <time>_<session id>.jsonl)"),
    "not a session file": (lambda d: str(session_file(d, text="hello\n")),
                           "the file has no Pi session header"),
    "a folder": (a_folder, "the Pi session file is not a regular file of this user"),
    "a relative path": (lambda d: f"sessions/x_{SESSION}.jsonl",
                        "hello.session_file is not the absolute path of a Pi session file"
                        " (.jsonl), nor null"),
    "not text": (lambda d: 42, "hello.session_file is not the absolute path of a Pi session"
                 " file (.jsonl), nor null"),
}
if os.getuid() == 0:  # only root can give a file to another user
    FORGED["another user's file"] = (foreign_owner, "the Pi session file is not a regular"
                                     " file of this user")


@pytest.mark.parametrize("case", sorted(FORGED))
def test_a_hello_naming_a_session_with_no_such_session_file_is_refused(
        home: Path, db: Database, decision: AskHandle, tmp_path: Path, case: str) -> None:
    make, problem = FORGED[case]
    bridge = BridgeProcess(home)
    try:
        bridge.send({"type": "hello", "session_id": SESSION, "session_file": make(
            tmp_path / "sessions"), "pi_version": "0.73.1", "mode": "rpc"})
        refused = bridge.read()
        assert refused is not None and (refused["code"], refused["message"]) == (
            "unverified", f"{problem}; nothing is accepted")
        bridge.send({"type": "answer", "decision_id": decision.decision_id,
                     "request_digest": decision.request.request_digest, "choice": "continue",
                     "input": None, "event_id": "forged-1", "source": "interactive"})
        after = bridge.read()
        assert after is not None and after["code"] == "hello_required"
        bridge.close_stdin()
        assert bridge.wait() == 0
    finally:
        bridge.kill()
    assert_nothing_recorded(db, decision)


def test_a_hello_without_a_session_file_is_refused(home: Path, db: Database,
                                                   decision: AskHandle) -> None:
    bridge = BridgeProcess(home)
    try:
        hello = json.dumps({"type": "hello", "secret": bridge.secret, "session_id": SESSION,
                            "pi_version": "0.73.1", "mode": "rpc"})
        bridge.send_raw(hello.encode() + b"\n")
        refused = bridge.read()
        assert refused is not None and (refused["code"], refused["message"]) == (
            "unverified", "hello.session_file is missing (the session's file, or null for a"
            " session Pi keeps in memory)")
    finally:
        bridge.kill()
    assert_nothing_recorded(db, decision)


@pytest.mark.parametrize("kind", ["file", "unwritten"])
def test_a_hello_naming_the_session_s_own_file_is_accepted(
        home: Path, db: Database, decision: AskHandle, tmp_path: Path, kind: str) -> None:
    path = session_file(tmp_path / "sessions")
    if kind == "unwritten":  # Pi writes nothing before the first assistant reply
        path.unlink()
    bridge = BridgeProcess(home)
    try:
        bridge.send({"type": "hello", "session_id": SESSION, "session_file": str(path),
                     "pi_version": "0.73.1", "mode": "rpc"})
        shown = bridge.read()
        assert shown is not None and (shown["type"], shown["decision_id"]) == (
            "deliver", decision.decision_id)
        bridge.send({"type": "delivered", "message_id": shown["message_id"],
                     "entry_id": "4f1c2a9e"})
        bridge.send({"type": "answer", "decision_id": decision.decision_id,
                     "request_digest": decision.request.request_digest, "choice": "continue",
                     "input": None, "event_id": "e-1", "source": "interactive"})
        result = bridge.read()
        assert result is not None and result["result"] == "won", result
        bridge.close_stdin()
        assert bridge.wait() == 0
    finally:
        bridge.kill()
    row = inbox.get_inbox(db.conn, sessions.session_channel_id(SESSION), f"{SESSION}:e-1")
    assert row is not None and row.payload["session"] == kind  # how it was checked
    assert db.read(lambda c: records.resolution_of(c, decision.decision_id)) is not None
