"""Real Pi with a scripted model: the agent asks through `ask_human`, a person answers (in Pi,
or on another channel), and the agent's next turn starts with the answer, exactly once, across
`/reload`, a closed session and `pi --continue`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from adapters.telegram.fake import FakeBotApi
from channels.decisions import records, resolution, turn_intents, views, workflows
from channels.decisions.resolution import HumanAnswer
from channels.telegram.buttons import callback_token
from state.database import Database
from tests.adapters.pi.helpers import count
from tests.adapters.pi.mock_model import MockModel, call, say, texts_sent
from tests.adapters.pi.rpc import (
    TURN_TYPE,
    RpcClient,
    bridge_command,
    is_notice,
    is_shown,
    needs_pi,
    wait_until,
)
from tests.channels.telegram.helpers import TOKEN, USER, configure_telegram_profile, run_cli

pytestmark = needs_pi

CHOICES = [{"id": "ship", "label": "Ship"},
           {"id": "hold", "label": "Hold", "text_prompt": "Why hold?", "max_length": 200}]


def is_turn(message: dict[str, Any]) -> bool:
    return (message.get("type") == "message_end"
            and message["message"].get("customType") == TURN_TYPE)


def agent_asks(client: RpcClient, model: MockModel, title: str, db: Database) -> str:
    """The model calls ask_human, then ends its turn; it is given the card's fingerprint (not
    the long id); returns the decision id."""
    model.add(call("ask_human", title=title, summary="All checks passed.", choices=CHOICES),
              say("I asked the person; I will continue when the answer comes."))
    client.send({"id": "go", "type": "prompt", "message": "Deploy when the person agrees."})
    done = client.wait_for(lambda m: m.get("type") == "tool_execution_end"
                           and m.get("toolName") == "ask_human", "the ask_human result")
    text = done["result"]["content"][0]["text"]
    found = re.search(r"decision ([0-9a-f]{12}), delivered to this Pi session", text)
    assert found, text
    assert "decision-" not in text
    client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the asking turn")
    return workflows.resolve_id(db, found.group(1))


def answer_in_pi(client: RpcClient, title: str) -> None:
    client.send({"id": "cmd", "type": "prompt", "message": "/decision"})
    assert client.answer_dialog("select", "2. Hold")["title"] == title
    client.answer_dialog("input", "Too risky today")
    client.wait_for(is_notice("Accepted: Hold"), "the accepted notice")


def turns_in(requests: list[dict[str, Any]], decision_id: str) -> int:
    """How often the last request to the model carried the answer to this decision (it names
    the card's fingerprint)."""
    with Database.open_reader() as db:
        fingerprint = db.read(lambda c: views.fingerprint_of(c, decision_id))
    return sum(1 for text in texts_sent(requests[-1])
               if text.startswith("[piw-channels] Answer") and f"(decision {fingerprint})" in text)


def turn_state(db: Database, decision_id: str) -> tuple[str, str | None]:
    turn_id = turn_intents.turn_intent_id_for(decision_id)
    status = str(db.conn.execute(
        "SELECT e.status FROM turn_intents t JOIN effects e USING (effect_id)"
        " WHERE t.turn_intent_id = ?", (turn_id,)).get)
    return status, db.read(lambda c: turn_intents.turn_entry(c, turn_id))


def test_the_agent_asks_a_person_answers_in_pi_and_the_next_turn_has_the_answer(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    client = RpcClient(home, bridge_command(tmp_path))
    try:
        session_id = client.session_id()
        decision_id = agent_asks(client, model, "Deploy to production?", db)
        assert db.conn.execute(
            "SELECT b.origin_session_id, b.execution_mode, r.status FROM human_decisions d"
            " JOIN run_bindings b USING (run_id) JOIN runs r USING (run_id)"
            " WHERE d.decision_id = ?", (decision_id,)).fetchone() == (
            session_id, "interactive", "waiting")
        client.wait_for(is_shown(decision_id), "the decision in the session")
        model.add(say("The person said hold; I will not deploy."))
        answer_in_pi(client, "Deploy to production?")
        shown = client.wait_for(is_turn, "the answer as a follow-up message")
        content = shown["message"]["content"]
        assert shown["message"]["details"]["turnIntentId"] == turn_intents.turn_intent_id_for(decision_id)
        assert "Outcome: accepted (answered)" in content
        assert "Choice: hold (Hold)" in content
        assert 'Text input (exact JSON): {"text": "Too risky today"}' in content
        assert "Answered by: a person through the pi channel" in content
        client.wait_for(lambda m: m.get("type") == "agent_end", "the answer's turn")
        assert turns_in(model.requests, decision_id) == 1
        assert session_id not in json.dumps(model.requests)  # the Pi answerer's actor id
        wait_until(lambda: turn_state(db, decision_id)[0] == "applied", "the receipt")
        entry = turn_state(db, decision_id)[1]
        assert entry is not None and len(entry) == 8
    finally:
        code = client.close()
    assert code == 0
    assert sum(1 for m in client.seen if is_turn(m)) == 1


def test_an_answer_on_telegram_reaches_the_session_that_asked(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    # The whole way: the loopback Bot API, real `poll --once` processes, a button press.
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)  # operator -> pi, telegram:ops
        client = RpcClient(home, bridge_command(tmp_path))
        try:
            session_id = client.session_id()
            model.add(call("ask_human", title="Rotate the keys?", choices=CHOICES),
                      say("Asked."))
            client.send({"id": "go", "type": "prompt", "message": "Rotate keys if approved."})
            done = client.wait_for(lambda m: m.get("type") == "tool_execution_end",
                                   "the ask_human result")
            assert "delivered to this Pi session, telegram:ops." in \
                done["result"]["content"][0]["text"]
            client.wait_for(lambda m: m.get("type") == "agent_end", "the asking turn")
            decision_id = str(db.conn.execute("SELECT decision_id FROM human_decisions").get)
            client.wait_for(is_shown(decision_id), "the decision in the session")
            assert run_cli(home, "poll", "--once").returncode == 0  # sent to Telegram
            [message] = fake.sent_messages(USER)
            digest = db.read(lambda c: records.load(c, decision_id)).request.request_digest
            fake.push_fixture("callback_press.json", {
                "user_id": USER, "chat_id": USER, "message_id": int(message["message_id"]),
                "message_text": "decision",
                "callback_data": callback_token(decision_id, digest, "ship")})
            model.add(say("Rotating."))
            assert run_cli(home, "poll", "--once").returncode == 0  # the press wins
            # The bridge settles before it offers the turn.
            client.wait_for(is_notice("Rotate the keys?: Accepted: Ship (answered on"
                                      " telegram:ops)"), "the settle notice")
            shown = client.wait_for(is_turn, "the answer as a follow-up message")
            assert "Answered by: a person through the telegram:ops channel" in \
                shown["message"]["content"]
            assert "Choice: ship (Ship)" in shown["message"]["content"]
            client.wait_for(lambda m: m.get("type") == "agent_end", "the answer's turn")
            assert turns_in(model.requests, decision_id) == 1
            # The model learns that a person answered on Telegram, never who.
            assert f"telegram-user:{USER}" not in json.dumps(model.requests)
            assert str(USER) not in json.dumps(model.requests)
            wait_until(lambda: turn_state(db, decision_id)[0] == "applied", "the receipt")
        finally:
            assert client.close() == 0
    assert db.conn.execute("SELECT channel FROM human_decision_resolutions").get == \
        "telegram:ops"
    assert session_id not in json.dumps(fake.sent_messages(USER))


def test_a_closed_session_gets_its_answer_on_continue_exactly_once(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    bridge = bridge_command(tmp_path)
    client = RpcClient(home, bridge, session=())
    try:
        session_id = client.session_id()
        decision_id = agent_asks(client, model, "Deploy to production?", db)
        client.wait_for(is_shown(decision_id), "the decision in the session")
    finally:
        assert client.close() == 0
    # The session is closed; the person answers elsewhere (the terminal operator view).
    decision = db.read(lambda c: records.load(c, decision_id))
    db.write(lambda c: resolution.resolve(c, HumanAnswer(
        decision_id, decision.request.request_digest, {"choice": "ship"}, "pi",
        "local:1000", "answer:1", "answer:1"), db.clock.now_ms()))
    assert turn_state(db, decision_id) == ("pending", None)

    model.add(say("Shipping now."))
    client = RpcClient(home, bridge, session=("--continue",))
    try:
        assert client.session_id() == session_id
        shown = client.wait_for(is_turn, "the answer, delivered on reopening")
        assert "Choice: ship (Ship)" in shown["message"]["content"]
        client.wait_for(lambda m: m.get("type") == "agent_end", "the answer's turn")
        wait_until(lambda: turn_state(db, decision_id)[0] == "applied", "the receipt")
        first_entry = turn_state(db, decision_id)[1]
        # A lost receipt (the bridge died after the message was added): the turn is offered
        # again after /reload and found in the session, not sent a second time.
        db.write(lambda c: c.execute(
            "UPDATE effects SET status = 'pending', settled_at = NULL WHERE effect_id ="
            " (SELECT effect_id FROM turn_intents WHERE turn_intent_id = ?)",
            (turn_intents.turn_intent_id_for(decision_id),)))
        client.send({"id": "reload", "type": "prompt", "message": "/test-reload"})
        wait_until(lambda: turn_state(db, decision_id)[0] == "applied",
                   "the receipt after /reload", timeout=30)
        assert turn_state(db, decision_id)[1] == first_entry
    finally:
        assert client.close() == 0
    client = RpcClient(home, bridge, session=("--continue",))
    try:
        client.session_id()
        client.send({"id": "cmd", "type": "prompt", "message": "/decision"})
        client.wait_for(is_notice("No open decisions"), "nothing left to answer")
    finally:
        assert client.close() == 0
    assert sum(1 for m in client.seen if is_turn(m)) == 0
    assert turns_in(model.requests, decision_id) == 1
    assert len(model.requests) == 3
    assert count(db, "SELECT count(*) FROM turn_intents") == 1
