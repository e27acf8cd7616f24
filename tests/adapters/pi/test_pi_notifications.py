"""Real Pi with a scripted model: a run's notification reaches its Pi session as a message
the person sees, never the model, exactly once: while the session is open, after `pi
--continue` when it was closed, and when its bridge is killed between the show and the
receipt (the next bridge offers it again and adopts the entry the branch has)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from channels.notifications import producing
from channels.notifications.producing import NotifySpec
from channels.pi import notes
from state.database import Database
from tests.adapters.pi.mock_model import MockModel, say, texts_sent
from tests.adapters.pi.rpc import RpcClient, bridge_command, needs_pi, wait_until
from tests.paths import ROOT

pytestmark = needs_pi

NOTE_TYPE = "piw-channels-notification"
TEXT = "Imported 12 tables; 3 rows rejected (see the log)."


def is_note(message: dict[str, Any]) -> bool:
    return (message.get("type") == "message_end"
            and message["message"].get("customType") == NOTE_TYPE)


def notify(db: Database, session_id: str, text: str = TEXT) -> str:
    spec = NotifySpec(kind="final", text=text, session_id=session_id, title="Nightly import")
    return producing.notify(db, spec, None, "host:test:1:x").notification.notification_id


def receipt(db: Database, notification_id: str) -> dict[str, Any] | None:
    return db.read(lambda c: notes.note_receipt(c, notification_id))


def attempts(db: Database, notification_id: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in db.conn.execute(
        "SELECT a.attempt_number, a.outcome FROM effect_attempts a JOIN notifications n"
        " USING (effect_id) WHERE n.notification_id = ? ORDER BY a.attempt_number",
        (notification_id,))]


def never_sent_to_the_model(model: MockModel, text: str = TEXT) -> None:
    assert model.requests, "the model was asked nothing"
    for body in model.requests:
        assert not any(text in sent for sent in texts_sent(body))
    assert "Nightly import" not in json.dumps(model.requests)


def test_an_open_session_shows_a_notification_once_and_the_model_never_sees_it(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    client = RpcClient(home, bridge_command(tmp_path))
    try:
        session_id = client.session_id()
        notification_id = notify(db, session_id)
        shown = client.wait_for(is_note, "the notification in the session")
        assert shown["message"]["details"]["notificationId"] == notification_id
        assert shown["message"]["content"] == f"Finished: Nightly import\n\n{TEXT}"
        wait_until(lambda: receipt(db, notification_id) is not None, "the receipt")
        got = receipt(db, notification_id)
        assert got is not None and got["adopted"] is False and len(got["entryId"]) == 8
        # It started no turn; the person's next message does, without it in the context.
        assert model.requests == []
        model.add(say("Hello."))
        client.send({"id": "go", "type": "prompt", "message": "What is new?"})
        client.wait_for(lambda m: m.get("type") == "agent_end", "the person's turn")
        never_sent_to_the_model(model)
    finally:
        assert client.close() == 0
    assert sum(1 for m in client.seen if is_note(m)) == 1
    assert attempts(db, notification_id) == [(1, "applied")]


def test_a_closed_session_gets_its_notification_on_continue_exactly_once(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    bridge = bridge_command(tmp_path)
    client = RpcClient(home, bridge, session=())
    try:
        session_id = client.session_id()
        model.add(say("Started the import."))  # Pi writes the session file with this reply
        client.send({"id": "go", "type": "prompt", "message": "Start the import."})
        client.wait_for(lambda m: m.get("type") == "agent_end", "the first turn")
    finally:
        assert client.close() == 0
    notification_id = notify(db, session_id)  # the session is closed: it waits
    assert receipt(db, notification_id) is None and attempts(db, notification_id) == []

    client = RpcClient(home, bridge, session=("--continue",))
    try:
        assert client.session_id() == session_id
        shown = client.wait_for(is_note, "the notification, on reopening")
        assert shown["message"]["details"]["notificationId"] == notification_id
        wait_until(lambda: receipt(db, notification_id) is not None, "the receipt")
        model.add(say("Done."))
        client.send({"id": "go", "type": "prompt", "message": "Anything else?"})
        client.wait_for(lambda m: m.get("type") == "agent_end", "the next turn")
    finally:
        assert client.close() == 0
    assert sum(1 for m in client.seen if is_note(m)) == 1
    first = receipt(db, notification_id)

    client = RpcClient(home, bridge, session=("--continue",))  # once more: nothing is due
    try:
        client.session_id()
        client.quiet(is_note, 3)
    finally:
        assert client.close() == 0
    assert receipt(db, notification_id) == first
    assert attempts(db, notification_id) == [(1, "applied")]
    session_file = next((home / ".pi" / "agent" / "sessions").rglob(f"*{session_id}.jsonl"))
    entries = [json.loads(line) for line in session_file.read_text().splitlines()]
    mine = [e for e in entries if e.get("customType") == NOTE_TYPE]
    assert first is not None and [e["id"] for e in mine] == [first["entryId"]]
    never_sent_to_the_model(model)


def crashing_bridge(tmp_path: Path, marker: Path, *, with_pi: bool = False) -> Path:
    """The real bridge, killed (SIGKILL) the first time a receipt reaches it: after the
    notification was shown, before the receipt was written (`with_pi`: Pi too, first)."""
    code = tmp_path / "crash_at_receipt.py"
    code.write_text(
        "import os, signal, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from pathlib import Path\n"
        "from adapters.pi import bridge\n"
        f"marker = Path({str(marker)!r})\n"
        "handle = bridge.Bridge.handle_line\n"
        "def crash_at_receipt(self, raw):\n"
        "    if b'\"notified\"' in raw and not marker.exists():\n"
        "        marker.touch()\n"
        f"        if {with_pi!r}: os.kill(os.getppid(), signal.SIGKILL)\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    handle(self, raw)\n"
        "bridge.Bridge.handle_line = crash_at_receipt\n"
        "from adapters.cli.main import main\n"
        "main()\n")
    script = tmp_path / "piw-channels-crashing"
    script.write_text(f"#!/bin/sh\ncd {ROOT}\nexec {sys.executable} {code} \"$@\"\n")
    script.chmod(0o755)
    return script


def test_a_bridge_killed_between_the_show_and_the_receipt_never_shows_it_twice(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    marker = tmp_path / "crashed"
    client = RpcClient(home, crashing_bridge(tmp_path, marker))
    try:
        session_id = client.session_id()
        notification_id = notify(db, session_id)
        client.wait_for(is_note, "the notification in the session")
        wait_until(marker.exists, "the bridge killed at the receipt")
        # The extension starts a bridge again; it offers the line again, the extension finds
        # the entry in the branch, and the receipt says it adopted it.
        wait_until(lambda: receipt(db, notification_id) is not None,
                   "the receipt of the bridge started again", timeout=30)
        client.quiet(is_note, 1)
    finally:
        assert client.close() == 0
    assert sum(1 for m in client.seen if is_note(m)) == 1
    got = receipt(db, notification_id)
    assert got is not None and got["adopted"] is True
    assert attempts(db, notification_id) == [(1, "interrupted"), (2, "applied")]


def test_pi_killed_between_the_show_and_the_receipt_shows_it_once_after_continue(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    marker = tmp_path / "crashed"
    client = RpcClient(home, crashing_bridge(tmp_path, marker, with_pi=True), session=())
    try:
        session_id = client.session_id()
        model.add(say("Started the import."))  # Pi writes the session file with this reply
        client.send({"id": "go", "type": "prompt", "message": "Start the import."})
        client.wait_for(lambda m: m.get("type") == "agent_end", "the first turn")
        notification_id = notify(db, session_id)
        client.wait_for(is_note, "the notification in the session")
        wait_until(marker.exists, "the bridge and Pi killed at the receipt")
        wait_until(lambda: client.proc.poll() is not None, "Pi gone")
    finally:
        client.close()
    assert receipt(db, notification_id) is None  # the receipt never came

    client = RpcClient(home, bridge_command(tmp_path), session=("--continue",))
    try:
        assert client.session_id() == session_id
        wait_until(lambda: receipt(db, notification_id) is not None, "the receipt", timeout=30)
        client.quiet(is_note, 1)
    finally:
        assert client.close() == 0
    got = receipt(db, notification_id)
    session_file = next((home / ".pi" / "agent" / "sessions").rglob(f"*{session_id}.jsonl"))
    entries = [json.loads(line) for line in session_file.read_text().splitlines()]
    mine = [e for e in entries if e.get("customType") == NOTE_TYPE]
    # One entry in the session, whichever way it went: found there (adopted) if Pi had written
    # it before it was killed, else shown once now.
    assert got is not None and [e["id"] for e in mine] == [got["entryId"]]
    assert got["adopted"] is (sum(1 for m in client.seen if is_note(m)) == 0)
    assert attempts(db, notification_id) == [(1, "interrupted"), (2, "applied")]
    never_sent_to_the_model(model)
