"""Real Pi (RPC mode): decision cards stay out of the model's context, a waiting decision shows
in the status line, Escape is not overridden by a waiting answer, failed tool calls say so,
and a decision resolved while Pi was closed is marked decided when the session is reopened."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from channels.decisions import records, resolution
from channels.decisions.resolution import HumanAnswer
from state.database import Database
from tests.adapters.pi.helpers import ask
from tests.adapters.pi.mock_model import MockModel, call, say, texts_sent
from tests.adapters.pi.rpc import (
    SETTLED_TYPE,
    TURN_TYPE,
    RpcClient,
    bridge_command,
    is_shown,
    needs_pi,
)

pytestmark = needs_pi


def answer_in_terminal(db: Database, decision_id: str) -> None:
    decision = db.read(lambda c: records.load(c, decision_id))
    db.write(lambda c: resolution.resolve(c, HumanAnswer(
        decision_id, decision.request.request_digest, {"choice": "continue"}, "pi",
        "local:1000", "answer:1", "answer:1"), db.clock.now_ms()))


def is_end(message: dict[str, Any]) -> bool:
    return message.get("type") == "agent_end"


def test_cards_stay_out_of_the_models_context_and_the_status_says_one_waits(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    handle = ask(db, "Rotate the keys?")  # a shell decision: shown in every session
    client = RpcClient(home, bridge_command(tmp_path))
    try:
        client.session_id()
        shown = client.wait_for(is_shown(handle.decision_id), "the card in the session")
        assert "Rotate the keys?" in shown["message"]["content"]
        assert any(m.get("method") == "setStatus"
                   and m.get("statusText") == "1 decision waiting (/decision)"
                   for m in client.seen)
        model.add(say("Hello."))
        client.send({"id": "go", "type": "prompt", "message": "Say hello."})
        client.wait_for(is_end, "the turn")
    finally:
        assert client.close() == 0
    sent = "\n".join(texts_sent(model.requests[-1]))
    assert "Say hello." in sent and "Rotate the keys?" not in sent


def test_a_failed_ask_human_call_carries_the_error_flag(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    model.add(call("ask_human", title="Go?", choices=[{"id": "1bad", "label": "Bad id"}]),
              say("It failed."))
    client = RpcClient(home, bridge_command(tmp_path))
    try:
        client.session_id()
        client.send({"id": "go", "type": "prompt", "message": "Ask."})
        done = client.wait_for(lambda m: m.get("type") == "tool_execution_end", "the result")
        assert done["isError"]
        assert done["result"]["content"][0]["text"].startswith("The question was not asked")
        client.wait_for(is_end, "the turn")
    finally:
        assert client.close() == 0
    system = texts_sent(model.requests[0])[0]
    assert "ask_human: ask_human:" not in system


def test_escape_wins_over_an_answer_that_waits(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    handle = ask(db, "Rotate the keys?")
    gate = threading.Event()
    busy = say("Still thinking.", gate=gate)
    model.add(busy)
    client = RpcClient(home, bridge_command(tmp_path))
    try:
        session_id = client.session_id()
        client.wait_for(is_shown(handle.decision_id), "the card")
        # Bind the decision's answer to this session's next turn, as ask_human does.
        db.write(lambda c: c.execute(
            "INSERT INTO run_bindings (run_id, origin_session_id, execution_mode, created_at)"
            " VALUES (?, ?, 'interactive', 0)", (handle.run.run_id, session_id)))
        client.send({"id": "go", "type": "prompt", "message": "Work."})
        assert busy.started.wait(30)
        answer_in_terminal(db, handle.decision_id)  # the answer waits: the agent is busy
        client.wait_for(lambda m: m.get("method") == "notify"
                        and "Accepted: Continue" in str(m.get("message")), "the settle notice")
        client.send({"id": "esc", "type": "abort"})
        client.wait_for(is_end, "the stopped turn")
        turn = client.wait_for(lambda m: m.get("type") == "message_end"
                               and m["message"].get("customType") == TURN_TYPE,
                               "the answer, added to the session")
        assert turn["message"]["details"]["byPerson"] is True
        client.quiet(lambda m: m.get("type") == "agent_start", 3)  # no turn restarted
        requests = len(model.requests)
        model.add(say("Continuing with the answer."))
        client.send({"id": "next", "type": "prompt", "message": "Go on."})
        client.wait_for(is_end, "the person's next turn")
    finally:
        gate.set()
        assert client.close() == 0
    assert requests == 1
    assert any(text.startswith("[piw-channels] Answer") for text in texts_sent(
        model.requests[-1]))


def test_a_decision_resolved_while_pi_was_closed_is_marked_decided_on_continue(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    handle = ask(db, "Rotate the keys?")
    bridge = bridge_command(tmp_path)
    model.add(say("Hello."))  # Pi writes the session file with the first assistant reply
    client = RpcClient(home, bridge, session=())
    try:
        client.session_id()
        client.wait_for(is_shown(handle.decision_id), "the card")
        client.send({"id": "go", "type": "prompt", "message": "Say hello."})
        client.wait_for(is_end, "the turn")
    finally:
        assert client.close() == 0
    answer_in_terminal(db, handle.decision_id)
    client = RpcClient(home, bridge, session=("--continue",))
    try:
        client.session_id()
        marked = client.wait_for(lambda m: m.get("type") == "message_end"
                                 and m["message"].get("customType") == SETTLED_TYPE,
                                 "the Decided marker")
        assert "Accepted: Continue (answered in the terminal)" in marked["message"]["content"]
    finally:
        assert client.close() == 0
