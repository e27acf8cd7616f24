"""D5 with real Pi (RPC mode): a real session passes the bridge's session check, both before
Pi has written its session file (nothing is written before the first assistant reply) and
after (the file's header names the session)."""

from __future__ import annotations

import json
from pathlib import Path

from channels import inbox
from channels.pi import sessions
from state.database import Database
from tests.adapters.pi.helpers import ask
from tests.adapters.pi.mock_model import MockModel, say
from tests.adapters.pi.rpc import RpcClient, bridge_command, is_shown, needs_pi, wait_until
from tests.adapters.pi.test_pi_defects import (
    _answer_through_decision,
    _delivery_status,
    _owner_of,
)

pytestmark = needs_pi


def test_a_real_pi_session_passes_the_session_check_before_and_after_its_file_is_written(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    model.add(say("Hello."))
    handle = ask(db)
    folder = home / ".pi" / "agent" / "sessions"
    client = RpcClient(home, bridge_command(tmp_path), session=())  # a session Pi keeps
    try:
        session_id = client.session_id()
        client.wait_for(is_shown(handle.decision_id), "the decision")
        wait_until(lambda: _delivery_status(db, session_id, handle.decision_id) == "confirmed",
                   "the delivery to be confirmed")
        assert list(folder.rglob("*.jsonl")) == []  # accepted by its folder and name
        client.send({"id": "go", "type": "prompt", "message": "Hi"})
        client.wait_for(lambda m: m.get("type") == "agent_end", "the first turn")
        [path] = folder.rglob(f"*_{session_id}.jsonl")
        assert json.loads(path.read_text().splitlines()[0])["id"] == session_id
        first_owner = _owner_of(db, session_id)
        client.send({"id": "reload", "type": "prompt", "message": "/test-reload"})
        wait_until(lambda: _owner_of(db, session_id) not in (None, first_owner),
                   "the new bridge to serve the session", timeout=30)
        _answer_through_decision(client, "Approve the plan?")
    finally:
        code = client.close()
    assert code == 0
    channel_id = sessions.session_channel_id(session_id)
    [key] = [str(r[0]) for r in db.conn.execute(
        "SELECT external_event_id FROM channel_inbox WHERE channel_id = ?", (channel_id,))]
    row = inbox.get_inbox(db.conn, channel_id, key)
    assert row is not None and row.payload["session"] == "file"  # the header was checked
