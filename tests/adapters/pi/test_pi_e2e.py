"""End to end with real Pi: RPC mode, the extension, its bridge, `/decision`, the database.

No model is needed: an extension command runs before Pi looks for one. The test is the RPC
client (it plays the person answering Pi's dialogs). It needs Node and
`@mariozechner/pi-coding-agent@0.73.1`; set `PIW_PI_BIN` to its `pi` executable (or put `pi`
on PATH), otherwise the test is skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from channels import inbox, messages, store
from channels.decisions import records
from channels.pi import deliveries, sessions
from state import leases
from state.database import Database
from tests.adapters.pi.helpers import ask
from tests.adapters.pi.rpc import (
    CUSTOM_TYPE,
    PI_NODE,
    RpcClient,
    bridge_command,
    needs_pi,
    wait_until,
)

pytestmark = needs_pi
# The suite may run Pi on another Node (PIW_PI_NODE): this test also runs on the machine's.
NODES = [pytest.param(PI_NODE, id="node-of-the-run")] + (
    [pytest.param(None, id="node-on-path")] if PI_NODE else [])


@pytest.mark.parametrize("node", NODES)
def test_real_pi_shows_the_decision_and_answers_it_through_decision(
        home: Path, db: Database, tmp_path: Path, node: str | None) -> None:
    handle = ask(db)
    client = RpcClient(home, bridge_command(tmp_path), node=node)
    try:
        client.send({"id": "state", "type": "get_state"})
        state = client.wait_for(lambda m: m.get("id") == "state", "get_state response")
        session_id = state["data"]["sessionId"]
        shown = client.wait_for(
            lambda m: m.get("type") == "message_end"
            and m["message"].get("customType") == CUSTOM_TYPE, "delivered decision")
        assert shown["message"]["details"]["decisionId"] == handle.decision_id
        assert "Approve the plan?" in shown["message"]["content"]
        channel_id = sessions.session_channel_id(session_id)
        message_id = deliveries.delivery_message_id(channel_id, handle.decision_id)

        def confirmed() -> bool:
            row = db.read(lambda c: messages.get_message(c, message_id))
            return row is not None and row.status == "confirmed"

        wait_until(confirmed, "the delivery to be confirmed with its entry id")

        client.send({"id": "cmd", "type": "prompt", "message": "/decision"})
        # One open decision: /decision goes straight to its choices (no one-item picker).
        choices = client.answer_dialog("select", "2. Replan")
        assert choices["title"] == "Approve the plan?"
        assert choices["options"] == ["1. Continue", "2. Replan", "3. Stop"]
        prompt = client.answer_dialog("input", "Ship a smaller plan")
        assert prompt["title"] == "What should change? (1-20 characters)"
        client.wait_for(lambda m: m.get("method") == "notify"
                        and m.get("message") == "Accepted: Replan", "the accepted notice")
    finally:
        code = client.close()
    assert code == 0

    resolution = db.read(lambda c: records.resolution_of(c, handle.decision_id))
    assert resolution is not None
    assert resolution.response == {"choice": "replan", "input": {"text": "Ship a smaller plan"}}
    assert db.conn.execute("SELECT channel, actor_id FROM human_decision_resolutions").fetchone() \
        == ("pi", session_id)
    [event_id] = [str(r[0]) for r in db.conn.execute(
        "SELECT external_event_id FROM channel_inbox WHERE channel_id = ?", (channel_id,))]
    row = inbox.get_inbox(db.conn, channel_id, event_id)
    assert row is not None and row.external_event_id.startswith(f"{session_id}:ui.")
    assert (row.payload["source"], row.payload["mode"], row.payload["pi_version"]) == (
        "interactive", "rpc", "0.73.1")
    entry = db.read(lambda c: messages.get_message(c, message_id))
    assert entry is not None and entry.conversation_ref == session_id
    assert entry.message_ref is not None and len(entry.message_ref) == 8

    def released() -> bool:
        state = db.read(lambda c: leases.read(c, store.channel_resource(channel_id)))
        return state is not None and state.owner_type is None

    wait_until(released, "the bridge to release the session's lease")
