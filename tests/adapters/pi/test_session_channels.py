"""D10: a Pi session gets its channel row only once it needs one.

Every `pi --no-session` start is a new session id; when each hello registered a channel (a
`channels` row, its resource, its registration event and its lease, all kept for good), the
store grew with every start. Now nothing is written until a decision is shown to the session,
it asks one, or an answer waits for it; what a real session needs is still there.
"""

from __future__ import annotations

from pathlib import Path

from channels import store
from channels.decisions import turn_intents, workflows
from channels.pi import sessions
from state.database import Database
from tests.adapters.pi.helpers import BridgeProcess, ask, count

SESSIONS = [f"1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e{n:02d}" for n in range(6)]


def hello(bridge: BridgeProcess, session_id: str) -> None:
    """Say hello, then prove the bridge took it: with no channel it has nothing to serve."""
    bridge.send({"type": "hello", "session_id": session_id, "pi_version": "0.73.1",
                 "mode": "rpc"})
    bridge.send({"type": "delivered", "message_id": "delivery-0", "entry_id": "0a0b0c0d"})
    got = bridge.read()
    assert got is not None and (got["type"], got["code"]) == ("error", "not_ready"), got


def channel_records(db: Database) -> tuple[int, int, int, int]:
    """(channels, channel resources, their leases, their events)."""
    return (count(db, "SELECT count(*) FROM channels"),
            count(db, "SELECT count(*) FROM resources WHERE resource_type = 'channel'"),
            count(db, "SELECT count(*) FROM leases WHERE resource_id LIKE 'channel:%'"),
            count(db, "SELECT count(*) FROM events WHERE resource_id LIKE 'channel:%'"))


def test_sessions_that_never_see_a_decision_add_no_channel(home: Path, db: Database) -> None:
    for session_id in SESSIONS:
        bridge = BridgeProcess(home)
        try:
            hello(bridge, session_id)
            bridge.close_stdin()
            assert bridge.wait() == 0
        finally:
            bridge.kill()
    assert channel_records(db) == (0, 0, 0, 0)


def test_an_idle_session_gets_its_channel_when_a_decision_opens(home: Path,
                                                                 db: Database) -> None:
    idle, shown = BridgeProcess(home), BridgeProcess(home)
    try:
        hello(idle, SESSIONS[0])
        hello(shown, SESSIONS[1])
        idle.close_stdin()
        assert idle.wait() == 0
        handle = ask(db)  # opened while the second session is open and idle
        got = shown.read()
        assert got is not None and (got["type"], got["decision_id"]) == (
            "deliver", handle.decision_id)
        shown.send({"type": "delivered", "message_id": got["message_id"],
                    "entry_id": "4f1c2a9e"})
        shown.close_stdin()
        assert shown.wait() == 0
    finally:
        idle.kill()
        shown.kill()
    channel_id = sessions.session_channel_id(SESSIONS[1])
    assert [r[0] for r in db.conn.execute("SELECT channel_id FROM channels")] == [channel_id]
    assert count(db, "SELECT count(*) FROM channel_messages WHERE channel_id = ?"
                 " AND status = 'confirmed'", channel_id) == 1


def test_a_session_that_asked_gets_its_answer_after_reopening(home: Path,
                                                              db: Database) -> None:
    # Nothing a real session needs is lost: its channel exists from its first `ask`, and a new
    # bridge of the same session (pi --continue) takes it up and is offered the answer.
    session_id = SESSIONS[2]
    first = BridgeProcess(home)
    try:
        hello(first, session_id)
        first.send({"type": "ask", "event_id": "a-1", "title": "Ship it?",
                    "choices": [{"id": "ship", "label": "Ship"}, {"id": "no", "label": "No"}]})
        asked = first.read()
        assert asked is not None and asked["type"] == "asked", asked
        first.close_stdin()
        assert first.wait() == 0
    finally:
        first.kill()
    decision_id = str(asked["decision_id"])
    workflows.cancel_decision(db, decision_id, "not needed", "operator-1")
    assert db.read(lambda c: turn_intents.pending_count(c, session_id)) == 1
    for other in SESSIONS[3:]:  # closed sessions with nothing open add nothing meanwhile
        bridge = BridgeProcess(home)
        try:
            hello(bridge, other)
        finally:
            bridge.kill()
    again = BridgeProcess(home)
    try:
        again.send({"type": "hello", "session_id": session_id, "pi_version": "0.73.1",
                    "mode": "rpc"})
        # The decision it showed is settled there, and the answer is offered as a turn.
        kinds = {m["type"]: m for m in (again.read(), again.read()) if m is not None}
        assert set(kinds) == {"settle", "turn"}, kinds
        assert kinds["settle"]["decision_id"] == decision_id
        got = kinds["turn"]
        assert got["turn_intent_id"] == turn_intents.turn_intent_id_for(decision_id)
        assert "Outcome: cancelled (not needed)" in got["content"]
        again.send({"type": "turned", "turn_intent_id": got["turn_intent_id"],
                    "entry_id": "0badc0de"})
        again.close_stdin()
        assert again.wait() == 0
    finally:
        again.kill()
    assert db.read(lambda c: turn_intents.pending_count(c, session_id)) == 0
    channel_id = sessions.session_channel_id(session_id)
    assert [r[0] for r in db.conn.execute("SELECT channel_id FROM channels")] == [channel_id]
    assert store.channel_row(db.conn, channel_id) == ("pi", session_id)
