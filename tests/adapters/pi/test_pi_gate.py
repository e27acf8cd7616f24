"""Real Pi (RPC mode) with a scripted model: the tool-call gate asks a person before a gated
call runs, on Telegram (real `poll` processes against the fake Bot API) or in Pi's dialog."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.pi.gatedesk import ESCAPE
from adapters.telegram.fake import FakeBotApi
from adapters.telegram.fake.wire import uploaded
from channels.config import gate as gate_config
from channels.decisions import records
from channels.pi import gating
from channels.telegram.buttons import callback_token
from state.database import Database
from tests.adapters.pi.helpers import ask
from tests.adapters.pi.mock_model import MockModel, call, calls, say, texts_sent
from tests.adapters.pi.rpc import (
    EXTENSION,
    RpcClient,
    bridge_command,
    is_notice,
    needs_pi,
    pi_command,
    pi_env,
    wait_until,
)
from tests.channels.telegram.helpers import (
    TOKEN,
    USER,
    config_dir,
    configure_telegram_profile,
    live_keyboards,
    message_parts,
    prompt_message,
    reply_to_prompt,
    run_cli,
)

pytestmark = needs_pi

RM = "rm -rf build && echo build-removed"


@pytest.fixture
def fake(home: Path) -> Iterator[FakeBotApi]:
    with FakeBotApi(token=TOKEN) as server:
        configure_telegram_profile(home, server.base_url)  # operator -> pi, telegram:ops
        yield server


def enable_gate(home: Path, **changes: Any) -> None:
    gate_config.write_gate_policy(config_dir(home), dataclasses.replace(
        gate_config.DEFAULT_POLICY, enabled=True, **changes))


def gate_decisions(db: Database) -> list[str]:
    return [str(d) for (d,) in db.conn.execute(
        "SELECT d.decision_id FROM human_decisions d JOIN runs r USING (run_id)"
        " WHERE r.workflow_ref = 'piw-channels.gate' ORDER BY d.created_at, d.decision_id")]


def wait_for_decisions(db: Database, count: int = 1) -> list[str]:
    wait_until(lambda: len(gate_decisions(db)) >= count, f"{count} gate decision(s)", timeout=60)
    return gate_decisions(db)


def poll(home: Path) -> None:
    done = run_cli(home, "poll", "--once")
    assert done.returncode == 0, done.stderr


def press(fake: FakeBotApi, db: Database, decision_id: str, choice: str) -> None:
    [*_, last] = message_parts(decision_id)
    assert last.message_ref is not None
    digest = db.read(lambda c: records.load(c, decision_id)).request.request_digest
    fake.push_fixture("callback_press.json", {
        "user_id": USER, "chat_id": USER, "message_id": int(last.message_ref),
        "message_text": "decision", "callback_data": callback_token(decision_id, digest, choice)})


def tool_end(client: RpcClient, what: str = "the bash result") -> dict[str, Any]:
    return client.wait_for(lambda m: m.get("type") == "tool_execution_end"
                           and m.get("toolName") == "bash", what, timeout=90)


def result_text(message: dict[str, Any]) -> str:
    return "\n".join(str(part.get("text", "")) for part in message["result"]["content"])


def resolution_row(db: Database, decision_id: str) -> tuple[Any, ...]:
    return tuple(db.conn.execute(
        "SELECT outcome, provenance, channel, reason FROM human_decision_resolutions"
        " WHERE decision_id = ?", (decision_id,)).fetchone())


def card_text(fake: FakeBotApi) -> str:
    return "\n".join(str(m.get("text", "")) for m in fake.sent_messages(USER))


def start(home: Path, tmp_path: Path, model: MockModel, *steps: Any) -> RpcClient:
    (home / "build").mkdir(exist_ok=True)
    model.add(*steps)
    client = RpcClient(home, bridge_command(tmp_path))
    client.session_id()
    client.send({"id": "go", "type": "prompt", "message": "Clean the build."})
    return client


def test_a_gated_command_allowed_on_telegram_runs_and_the_model_sees_its_output(
        home: Path, db: Database, tmp_path: Path, model: MockModel, fake: FakeBotApi) -> None:
    enable_gate(home)
    client = start(home, tmp_path, model, call("bash", command=RM), say("Done."))
    try:
        [decision_id] = wait_for_decisions(db)
        # Pi's own dialog opens at once (RPC mode has a UI: the client).
        client.wait_for(lambda m: m.get("method") == "select"
                        and RM in str(m.get("title")), "the Pi dialog")
        poll(home)
        card = card_text(fake)
        assert RM in card and "Pi wants to run a command" in card
        assert "Working directory" in card and str(home) in card
        assert (home / "build").is_dir()  # nothing ran yet
        press(fake, db, decision_id, gating.ALLOW)
        poll(home)
        done = tool_end(client)
        assert not done["isError"]
        assert "build-removed" in result_text(done)
        assert "Allowed on Telegram" in result_text(done)
        # The Pi dialog closed, saying who answered.
        assert any(is_notice("Pi wants to run a command: Allowed on Telegram")(m)
                   for m in client.seen)
        client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the turn")
        assert any("build-removed" in text for text in texts_sent(model.requests[-1]))
    finally:
        assert client.close() == 0
    assert not (home / "build").exists()
    assert resolution_row(db, decision_id) == ("accepted", "human", "telegram:ops", None)
    assert live_keyboards(fake.keyboards()) == []  # the card is settled
    # The answer went to the waiting call, not to a deferred model turn.
    assert db.conn.execute("SELECT count(*) FROM turn_intents").get == 0
    assert db.conn.execute("SELECT status FROM runs WHERE workflow_ref = 'piw-channels.gate'"
                           ).get == "completed"


def test_denied_on_telegram_with_a_reason_blocks_and_the_model_gets_the_reason(
        home: Path, db: Database, tmp_path: Path, model: MockModel, fake: FakeBotApi) -> None:
    enable_gate(home)
    client = start(home, tmp_path, model, call("bash", command=RM), say("I will not."))
    try:
        [decision_id] = wait_for_decisions(db)
        poll(home)
        press(fake, db, decision_id, gating.DENY_REASON)
        poll(home)  # the ForceReply prompt goes out
        prompt = prompt_message(decision_id)
        assert prompt is not None
        reply_to_prompt(fake, prompt[0], prompt[1], "the build is still needed")
        poll(home)
        done = tool_end(client)
        assert done["isError"]
        assert result_text(done) == "Denied on Telegram: the build is still needed"
        client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the turn")
        assert "Denied on Telegram: the build is still needed" in texts_sent(
            model.requests[-1])
    finally:
        assert client.close() == 0
    assert (home / "build").is_dir()
    assert str(USER) not in json.dumps(model.requests)  # never a person's id


def test_no_answer_in_time_denies_and_settles_the_card(
        home: Path, db: Database, tmp_path: Path, model: MockModel, fake: FakeBotApi) -> None:
    enable_gate(home, timeout_minutes=0.5)
    client = start(home, tmp_path, model, call("bash", command=RM), say("No answer."))
    try:
        [decision_id] = wait_for_decisions(db)
        poll(home)
        done = tool_end(client, "the denial at the deadline")
        assert done["isError"]
        assert result_text(done) == "Denied: no answer within 30 seconds"
        client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the turn")
    finally:
        assert client.close() == 0
    assert resolution_row(db, decision_id)[:2] == ("accepted", "timeout_policy")
    poll(home)
    assert live_keyboards(fake.keyboards()) == []
    assert (home / "build").is_dir()


def test_escape_cancels_the_decision_and_settles_the_card(
        home: Path, db: Database, tmp_path: Path, model: MockModel, fake: FakeBotApi) -> None:
    enable_gate(home)
    client = start(home, tmp_path, model, call("bash", command=RM))
    try:
        [decision_id] = wait_for_decisions(db)
        poll(home)
        assert live_keyboards(fake.keyboards()) != []
        client.send({"id": "esc", "type": "abort"})
        wait_until(lambda: db.conn.execute(
            "SELECT count(*) FROM human_decision_resolutions WHERE decision_id = ?",
            (decision_id,)).get == 1, "the cancellation")
        client.wait_for(lambda m: m.get("type") == "agent_end", "the stopped turn")
        model.add(say("Understood."))
        client.send({"id": "next", "type": "prompt", "message": "What happened?"})
        client.wait_for(lambda m: m.get("type") == "agent_end", "the next turn")
        assert "Cancelled: you pressed Escape" in texts_sent(model.requests[-1])
    finally:
        assert client.close() == 0
    assert resolution_row(db, decision_id) == ("cancelled", "explicit_cancel", None, ESCAPE)
    poll(home)
    assert live_keyboards(fake.keyboards()) == []
    assert (home / "build").is_dir()


def test_an_answer_in_pis_dialog_settles_the_telegram_card(
        home: Path, db: Database, tmp_path: Path, model: MockModel, fake: FakeBotApi) -> None:
    enable_gate(home)
    client = start(home, tmp_path, model, call("bash", command=RM), say("Done."))
    try:
        [decision_id] = wait_for_decisions(db)
        poll(home)
        assert live_keyboards(fake.keyboards()) != []
        client.answer_dialog("select", "1. Allow once")
        done = tool_end(client)
        assert "Allowed in Pi" in result_text(done) and "build-removed" in result_text(done)
        client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the turn")
    finally:
        assert client.close() == 0
    assert resolution_row(db, decision_id)[:3] == ("accepted", "human", "pi")
    poll(home)
    assert live_keyboards(fake.keyboards()) == []


def test_two_gated_calls_in_one_message_each_get_their_own_decision(
        home: Path, db: Database, tmp_path: Path, model: MockModel, fake: FakeBotApi) -> None:
    enable_gate(home)
    (home / "dist").mkdir()
    client = start(home, tmp_path, model,
                   calls(("bash", {"command": "rm -rf build"}), ("bash", {"command": "rm -rf dist"})),
                   say("Done."))
    try:
        # Pi judges sibling calls one after the other: the second asks once the first is decided.
        client.answer_dialog("select", "1. Allow once")
        client.answer_dialog("select", "2. Deny")
        ends = [tool_end(client, "the first result"), tool_end(client, "the second result")]
        client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the turn")
    finally:
        assert client.close() == 0
    first, second = gate_decisions(db)
    assert resolution_row(db, first)[:3] == ("accepted", "human", "pi")
    assert sorted(result_text(end) for end in ends)[0].startswith("Denied in Pi")
    subjects = [db.read(lambda c, d=d: records.load(c, d)).request.document["subject"]
                for d in (first, second)]
    assert [s["input"]["command"] for s in subjects] == ["rm -rf build", "rm -rf dist"]
    assert not (home / "build").exists() and (home / "dist").is_dir()


def test_allowed_for_the_session_stops_asking_for_exactly_that_input(
        home: Path, db: Database, tmp_path: Path, model: MockModel, fake: FakeBotApi) -> None:
    enable_gate(home)
    client = start(home, tmp_path, model, call("bash", command="rm -rf build"),
                   call("bash", command="rm -rf build"), call("bash", command="rm -rf build "),
                   say("Done."))
    try:
        client.answer_dialog("select", "4. Allow this exact command for this session")
        first = tool_end(client, "the first run")
        assert "Allowed in Pi for this session" in result_text(first)
        again = tool_end(client, "the same command, not asked again")
        assert "allowed for this session" in result_text(again)
        # One space more is another input: asked again.
        client.answer_dialog("select", "2. Deny")
        other = tool_end(client, "the other input")
        assert other["isError"]
        client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the turn")
        client.send({"id": "gate", "type": "prompt", "message": "/gate"})
        shown = client.wait_for(is_notice("Allowed for this session:"), "the /gate notice")
        assert "bash: rm -rf build (in " in shown["message"]
    finally:
        assert client.close() == 0
    assert len(gate_decisions(db)) == 2


def test_with_the_gate_off_nothing_is_asked(
        home: Path, db: Database, tmp_path: Path, model: MockModel, fake: FakeBotApi) -> None:
    client = start(home, tmp_path, model, call("bash", command=RM), say("Done."))  # no gate.json
    try:
        done = tool_end(client)
        assert "build-removed" in result_text(done)
        client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the turn")
        # On in the policy, off for this session: still nothing is asked (also after /reload).
        enable_gate(home)
        (home / "build").mkdir()
        client.send({"id": "off", "type": "prompt", "message": "/gate off"})
        client.wait_for(is_notice("off for this session"), "the /gate off notice")
        client.send({"id": "reload", "type": "prompt", "message": "/test-reload"})
        model.add(call("bash", command=RM), say("Done again."))
        client.send({"id": "go2", "type": "prompt", "message": "Again."})
        done = tool_end(client, "the second run")
        assert "build-removed" in result_text(done)
        client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the second turn")
    finally:
        assert client.close() == 0
    assert gate_decisions(db) == []
    assert not (home / "build").exists()


def test_a_broken_policy_file_fails_closed_with_one_line(
        home: Path, db: Database, tmp_path: Path, model: MockModel, fake: FakeBotApi) -> None:
    path = gate_config.gate_path(config_dir(home))
    path.write_text("{not json")
    path.chmod(0o600)
    client = start(home, tmp_path, model, call("bash", command=RM),
                   call("bash", command="echo harmless"), say("Done."))
    try:
        denied = tool_end(client, "the denied call")
        assert denied["isError"]
        reason = result_text(denied)
        assert str(path) in reason and "\n" not in reason
        harmless = tool_end(client, "the harmless call")
        assert "harmless" in result_text(harmless) and not harmless["isError"]
        client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the turn")
    finally:
        assert client.close() == 0
    assert (home / "build").is_dir()
    assert gate_decisions(db) == []


def print_mode(home: Path, tmp_path: Path) -> subprocess.Popen[str]:
    """`pi -p` (print mode): no UI at all, so only Telegram can ask."""
    return subprocess.Popen(
        pi_command("-p", "--no-session", "--offline", "--no-extensions", "-e", str(EXTENSION),
                   "Clean the build."), cwd=home, env=pi_env(home, bridge_command(tmp_path)),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_with_no_ui_only_telegram_asks(
        home: Path, db: Database, tmp_path: Path, model: MockModel, fake: FakeBotApi) -> None:
    enable_gate(home)
    (home / "build").mkdir()
    model.add(call("bash", command=RM), say("Cleaned."))
    proc = print_mode(home, tmp_path)
    try:
        [decision_id] = wait_for_decisions(db)
        poll(home)
        press(fake, db, decision_id, gating.ALLOW)
        poll(home)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Cleaned." in out
    assert resolution_row(db, decision_id)[:3] == ("accepted", "human", "telegram:ops")
    assert not (home / "build").exists()
    assert any("build-removed" in t and "Allowed on Telegram" in t
               for t in texts_sent(model.requests[-1]))


def test_with_no_ui_and_no_telegram_route_the_call_is_denied(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    enable_gate(home)  # no channels.json: the audience routes to Pi only
    (home / "build").mkdir()
    model.add(call("bash", command=RM), say("Could not."))
    proc = print_mode(home, tmp_path)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    assert any(t.startswith("Denied: nobody can be asked") for t in texts_sent(
        model.requests[-1]))
    assert (home / "build").is_dir()
    assert gate_decisions(db) == []


def test_the_models_attempts_to_answer_cancel_or_erase_a_decision_are_blocked(
        home: Path, db: Database, tmp_path: Path, model: MockModel, fake: FakeBotApi) -> None:
    # The gate is off (no gate.json): the guard applies all the same.
    handle = ask(db, "Deploy?")
    decision_id = handle.decision_id
    state = home / ".pi" / "agent" / "workflows" / "state.sqlite"
    attempts: list[tuple[str, dict[str, Any]]] = [
        ("bash", {"command": f'script -qec "piw-channels pi answer {decision_id} continue"'
                             " /dev/null"}),
        ("bash", {"command": "python3 -c 'import pty; pty.spawn([\"piw-channels\", \"pi\","
                             f' \"answer\", \"{decision_id}\", \"continue\"])\''}),
        ("bash", {"command": f"piw-channels cancel {decision_id}"}),
        ("bash", {"command": f'sqlite3 {state} "DELETE FROM human_decisions"'}),
        ("bash", {"command": "pgrep -P $PPID | xargs kill"}),
        ("bash", {"command": "pi --mode rpc --continue"}),
        ("read", {"path": str(state)}),
        ("write", {"path": str(config_dir(home) / "gate.json"), "content": "{}"}),
    ]
    model.add(*(call(tool, **arguments) for tool, arguments in attempts), say("I tried."))
    client = RpcClient(home, bridge_command(tmp_path))
    try:
        client.session_id()
        client.send({"id": "go", "type": "prompt", "message": "Get the decision answered."})
        ends = [client.wait_for(lambda m: m.get("type") == "tool_execution_end",
                                f"the result of attempt {at}", timeout=60)
                for at in range(len(attempts))]
        client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the turn")
        assert client.proc.poll() is None
    finally:
        assert client.close() == 0
    for (tool, arguments), end in zip(attempts, ends, strict=True):
        assert end["isError"], (tool, arguments, result_text(end))
        assert result_text(end).startswith("Blocked"), result_text(end)
    assert db.conn.execute("SELECT count(*) FROM human_decision_resolutions").get == 0
    assert db.conn.execute("SELECT count(*) FROM human_decisions").get == 1
    assert not (config_dir(home) / "gate.json").exists()
    assert gate_decisions(db) == []


def test_a_gated_100000_character_heredoc_is_asked_with_the_whole_input_attached(
        home: Path, db: Database, tmp_path: Path, model: MockModel, fake: FakeBotApi) -> None:
    body = "".join(f"row {i:05d}: the data the agent writes\n" for i in range(2_710))
    heredoc = f"cat > {home}/out.txt <<'EOF'\n{body}EOF"
    assert len(heredoc) >= 100_000
    enable_gate(home, tools=("bash",))  # every bash call is asked
    client = start(home, tmp_path, model, call("bash", command=heredoc), say("Done."))
    try:
        [decision_id] = wait_for_decisions(db)  # asked, not denied for its length
        poll(home)
        [document] = fake.requests("sendDocument")
        assert uploaded(document.params) == heredoc.encode()  # the whole input, exactly
        assert document.params["document"]["file_name"] == "input.txt"
        card = card_text(fake)
        assert "Attached: input.txt: 2,712 lines" in card and f"cat > {home}/out.txt" in card
        stored = db.read(lambda c: records.load(c, decision_id))
        assert stored.request.document["subject"]["input"]["command"] == heredoc
        assert not (home / "out.txt").exists()  # nothing ran yet
        press(fake, db, decision_id, gating.ALLOW)
        poll(home)
        done = tool_end(client)
        assert not done["isError"] and "Allowed on Telegram" in result_text(done)
    finally:
        assert client.close() == 0
    assert (home / "out.txt").read_text() == body
    assert resolution_row(db, decision_id) == ("accepted", "human", "telegram:ops", None)
