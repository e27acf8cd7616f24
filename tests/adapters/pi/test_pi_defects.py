"""Real Pi (RPC mode): the extension survives a broken bridge and says what to do about it."""

from __future__ import annotations

import json
import os
import shlex
import signal
import threading
import time
from pathlib import Path
from typing import Any

from adapters.telegram.fake import FakeBotApi
from channels import messages, store
from channels.decisions import records, workflows
from channels.pi import deliveries, sessions
from channels.telegram.buttons import callback_token
from state import leases
from state.database import Database
from tests.adapters.pi.helpers import CHOICES, ask
from tests.adapters.pi.mock_model import MockModel, call, say
from tests.adapters.pi.rpc import (
    SETTLED_TYPE,
    RpcClient,
    bridge_command,
    is_notice,
    is_shown,
    needs_pi,
    wait_until,
)
from tests.channels.telegram.helpers import TOKEN, USER, configure_telegram_profile, run_cli

pytestmark = needs_pi


def test_a_line_that_is_not_json_does_not_crash_pi(home: Path, db: Database,
                                                   tmp_path: Path) -> None:
    # D4: the bridge (or a wrapper around it) prints something that is not a protocol line.
    handle = ask(db)
    client = RpcClient(home, bridge_command(tmp_path, before='echo "warming up (not json)"'))
    try:
        client.wait_for(is_notice("not a protocol line"), "the notice about the bad line")
        client.wait_for(is_shown(handle.decision_id), "the decision, shown all the same")
        assert client.proc.poll() is None
    finally:
        code = client.close()
    assert code == 0


def test_a_bridge_that_cannot_start_shows_its_fix(home: Path, db: Database,
                                                  tmp_path: Path) -> None:
    # D6: the bridge exits 77 and prints the fix; Pi shows the fix, not only the exit code.
    state_dir = home / ".pi" / "agent" / "workflows"
    state_dir.chmod(0o755)
    client = RpcClient(home, bridge_command(tmp_path))
    try:
        notice = client.wait_for(is_notice("piw-channels bridge exited (77)"), "the exit notice")
        assert f"fix: chmod 700 {state_dir}" in notice["message"]
        assert notice["notifyType"] == "error"
    finally:
        state_dir.chmod(0o700)
        code = client.close()
    assert code == 0


def _delivery_status(db: Database, session_id: str, decision_id: str) -> str | None:
    channel_id = sessions.session_channel_id(session_id)
    row = db.read(lambda c: messages.get_message(
        c, deliveries.delivery_message_id(channel_id, decision_id)))
    return None if row is None else row.status


def test_a_decision_that_arrives_during_a_turn_is_shown_after_it(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    # D1: at `agent_end` Pi is not idle yet; the queued decision must still be shown.
    gate = threading.Event()
    busy = say("Working on it.", gate=gate)
    model.add(busy)
    client = RpcClient(home, bridge_command(tmp_path))
    try:
        session_id = client.session_id()
        client.send({"id": "go", "type": "prompt", "message": "Do the work"})
        assert busy.started.wait(30)
        handle = ask(db)
        wait_until(lambda: _delivery_status(db, session_id, handle.decision_id) == "pending",
                   "the bridge to send the decision while the agent is busy")
        gate.set()
        client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the turn")
        client.wait_for(is_shown(handle.decision_id), "the decision, shown after the turn")
        wait_until(lambda: _delivery_status(db, session_id, handle.decision_id) == "confirmed",
                   "the delivery to be confirmed")
    finally:
        code = client.close()
    assert code == 0


def test_a_decision_resolved_while_it_waited_is_never_shown_as_open(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    # D2: it was queued during a turn and settled before the turn ended.
    gate = threading.Event()
    busy = say("Working on it.", gate=gate)
    model.add(busy)
    client = RpcClient(home, bridge_command(tmp_path))
    try:
        session_id = client.session_id()
        client.send({"id": "go", "type": "prompt", "message": "Do the work"})
        assert busy.started.wait(30)
        first = ask(db, "Deploy now?")
        wait_until(lambda: _delivery_status(db, session_id, first.decision_id) == "pending",
                   "the bridge to send the decision while the agent is busy")
        workflows.cancel_decision(db, first.decision_id, "withdrawn", "owner-2")
        client.wait_for(is_notice("Cancelled: withdrawn"), "the settle notice")
        gate.set()
        client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the turn")
        second = ask(db, "Second question?")
        client.wait_for(is_shown(second.decision_id), "the next decision")
        assert not any(is_shown(first.decision_id)(m) for m in client.seen)
        assert _delivery_status(db, session_id, first.decision_id) == "pending"
    finally:
        code = client.close()
    assert code == 0


def _owner_of(db: Database, session_id: str) -> str | None:
    state = db.read(lambda c: leases.read(
        c, store.channel_resource(sessions.session_channel_id(session_id))))
    return None if state is None or not state.is_live(db.clock.now_ms()) else state.owner_id


def _answer_through_decision(client: RpcClient, title: str, timeout: float = 20) -> None:
    # A new bridge writes its deliver line right after it claims the lease; /decision may
    # reach the extension before that line does ("No open decisions"): ask again.
    end = time.monotonic() + timeout
    while True:
        client.send({"id": "cmd", "type": "prompt", "message": "/decision"})
        picked = client.wait_for(
            lambda m: m.get("method") == "select" or is_notice("No open decisions")(m),
            "the decision menu")
        if picked.get("method") == "select":
            break
        assert time.monotonic() < end, "the decision never became answerable"
        time.sleep(0.3)
    # One open decision: its choices at once (no one-item picker).
    assert picked["title"] == title and picked["options"][0] == "1. Continue"
    client.send({"type": "extension_ui_response", "id": picked["id"], "value": "1. Continue"})
    client.wait_for(is_notice("Accepted: Continue"), "the accepted notice")


def test_after_reload_a_decision_shown_before_is_still_answerable(
        home: Path, db: Database, tmp_path: Path) -> None:
    # D3: the new bridge skipped confirmed deliveries, so /decision had nothing to offer.
    handle = ask(db)
    client = RpcClient(home, bridge_command(tmp_path))
    try:
        session_id = client.session_id()
        client.wait_for(is_shown(handle.decision_id), "the decision")
        wait_until(lambda: _delivery_status(db, session_id, handle.decision_id) == "confirmed",
                   "the delivery to be confirmed")
        first_owner = _owner_of(db, session_id)
        client.send({"id": "reload", "type": "prompt", "message": "/test-reload"})
        wait_until(lambda: _owner_of(db, session_id) not in (None, first_owner),
                   "the new bridge to serve the session", timeout=30)
        _answer_through_decision(client, "Approve the plan?")
        assert sum(1 for m in client.seen if is_shown(handle.decision_id)(m)) == 1
    finally:
        code = client.close()
    assert code == 0
    assert db.read(lambda c: records.resolution_of(c, handle.decision_id)) is not None


def test_after_continue_a_decision_shown_before_is_still_answerable(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    model.add(say("Hello."))
    bridge = bridge_command(tmp_path)
    client = RpcClient(home, bridge, session=())
    try:
        session_id = client.session_id()
        client.send({"id": "go", "type": "prompt", "message": "Hi"})
        client.wait_for(lambda m: m.get("type") == "agent_end", "the first turn")
        handle = ask(db)
        client.wait_for(is_shown(handle.decision_id), "the decision")
        wait_until(lambda: _delivery_status(db, session_id, handle.decision_id) == "confirmed",
                   "the delivery to be confirmed")
    finally:
        assert client.close() == 0
    client = RpcClient(home, bridge, session=("--continue",))
    try:
        assert client.session_id() == session_id
        wait_until(lambda: _owner_of(db, session_id) is not None, "the bridge to serve it")
        _answer_through_decision(client, "Approve the plan?")
        assert not any(is_shown(handle.decision_id)(m) for m in client.seen)
    finally:
        code = client.close()
    assert code == 0


def test_the_agent_cannot_answer_through_a_bridge_of_its_own(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    # D5: it worked from the agent's own bash tool; now the gate's guard blocks the call
    # (and a bridge started anyway refuses it: test_bridge and test_session_check).
    handle = ask(db)
    bridge = bridge_command(tmp_path)
    client = RpcClient(home, bridge)
    try:
        session_id = client.session_id()
        client.wait_for(is_shown(handle.decision_id), "the decision")
        hello = json.dumps({"type": "hello", "session_id": session_id, "pi_version": "0.73.1",
                            "mode": "rpc"})
        answer = json.dumps({"type": "answer", "decision_id": handle.decision_id,
                             "request_digest": handle.request.request_digest,
                             "choice": "continue", "input": None, "event_id": "x",
                             "source": "interactive"})
        lines = f"printf '%s\\n' {shlex.quote(hello)} {shlex.quote(answer)}"
        model.add(call("bash", command=f"{lines} | {bridge} pi bridge;"
                                       f" {lines} | {bridge} pi bridge --secret-fd 0"),
                  say("I tried."))
        client.send({"id": "go", "type": "prompt", "message": "Approve it yourself."})
        done = client.wait_for(lambda m: m.get("type") == "tool_execution_end", "the bash tool")
        output = done["result"]["content"][0]["text"]
        assert done["isError"] and output.startswith("Blocked: `piw-channels pi bridge`"), output
        client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the turn")
    finally:
        code = client.close()
    assert code == 0
    assert db.read(lambda c: records.resolution_of(c, handle.decision_id)) is None
    assert db.conn.execute("SELECT count(*) FROM human_decision_submissions").get == 0
    assert [r[0] for r in db.conn.execute("SELECT profile_key FROM channels")] == [session_id]


def test_a_killed_bridge_is_restarted_and_its_decisions_stay_answerable(
        home: Path, db: Database, tmp_path: Path) -> None:
    # D7: it was not restarted, and /decision then said "No open decisions".
    handle = ask(db)
    client = RpcClient(home, bridge_command(tmp_path))
    try:
        session_id = client.session_id()
        client.wait_for(is_shown(handle.decision_id), "the decision")
        wait_until(lambda: _delivery_status(db, session_id, handle.decision_id) == "confirmed",
                   "the delivery to be confirmed")
        owner = _owner_of(db, session_id)
        assert owner is not None
        os.kill(int(owner.split(":")[2]), signal.SIGKILL)
        notice = client.wait_for(is_notice("restarting in 1 s"), "the bridge-down notice")
        assert notice["message"].startswith("piw-channels bridge exited (signal)")
        client.wait_for(lambda m: m.get("method") == "setStatus"
                        and m.get("statusText") == "piw-channels: bridge down, restarting",
                        "the status line")
        wait_until(lambda: _owner_of(db, session_id) not in (None, owner),
                   "the restarted bridge to serve the session")
        _answer_through_decision(client, "Approve the plan?")
        assert sum(1 for m in client.seen if is_shown(handle.decision_id)(m)) == 1
    finally:
        code = client.close()
    assert code == 0


def test_a_missing_piw_channels_says_how_to_fix_it(home: Path, tmp_path: Path) -> None:
    # D11/D13: Pi showed only "spawn piw-channels ENOENT".
    client = RpcClient(home, tmp_path / "nowhere" / "piw-channels")
    try:
        notice = client.wait_for(is_notice("was not found"), "the missing-command notice")
        assert "set PIW_CHANNELS_BIN to its full path" in notice["message"]
        client.send({"id": "cmd", "type": "prompt", "message": "/decision"})
        down = client.wait_for(lambda m: m.get("method") == "notify"
                               and m is not notice, "the /decision answer")
        assert "fix it, then /reload" in down["message"]
    finally:
        code = client.close()
    assert code == 0


def test_a_telegram_answer_closes_the_open_dialog_and_marks_the_decision_decided(
        home: Path, db: Database, tmp_path: Path) -> None:
    # D8: the dialog stayed open, the notice had no title or channel, the history kept
    # saying "Answer with /decision". The press goes through the loopback Bot API and a real
    # `poll --once` while the person has the dialog open in Pi.
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)  # operator -> pi, telegram:ops
        handle = ask(db)
        assert run_cli(home, "poll", "--once").returncode == 0
        [message] = fake.sent_messages(USER)
        client = RpcClient(home, bridge_command(tmp_path))
        try:
            client.wait_for(is_shown(handle.decision_id), "the decision")
            client.send({"id": "cmd", "type": "prompt", "message": "/decision"})
            choices = client.wait_for(lambda m: m.get("method") == "select"
                                      and m.get("title") == "Approve the plan?", "the choices")
            fake.push_fixture("callback_press.json", {
                "user_id": USER, "chat_id": USER, "message_id": int(message["message_id"]),
                "message_text": "decision", "callback_data": callback_token(
                    handle.decision_id, handle.request.request_digest, "continue")})
            assert run_cli(home, "poll", "--once").returncode == 0
            client.wait_for(is_notice("Already decided: Approve the plan?: Accepted: Continue"
                                      " (answered on telegram:ops)"), "the dialog's close")

            def is_mark(m: dict[str, Any]) -> bool:
                return m.get("type") == "message_end" \
                    and m["message"].get("customType") == SETTLED_TYPE

            marked = next((m for m in client.seen if is_mark(m)), None) \
                or client.wait_for(is_mark, "the decided mark in the session")
            assert marked["message"]["content"].startswith(
                "Decided: Approve the plan?: Accepted")
            # The closed dialog's late answer changes nothing; the list is empty now.
            client.send({"type": "extension_ui_response", "id": choices["id"],
                         "value": "3. Stop"})
            client.send({"id": "cmd2", "type": "prompt", "message": "/decision"})
            client.wait_for(is_notice("No open decisions"), "an empty list")
        finally:
            code = client.close()
    assert code == 0
    assert db.conn.execute("SELECT channel FROM human_decision_resolutions").get == \
        "telegram:ops"
    assert db.conn.execute("SELECT count(*) FROM human_decision_submissions").get == 1


def test_the_text_dialog_shows_its_limits_and_asks_again_for_empty_or_long_text(
        home: Path, db: Database, tmp_path: Path) -> None:
    # D13: the length hint was invisible and an empty answer ended the dialog.
    spec = workflows.AskSpec(title="Approve the plan?", presentation=workflows.presentation_for(
        "Approve the plan?", None, None), choices=CHOICES)
    handle = workflows.create_ask(db, spec, "owner-1")
    workflows.release_run(db, handle.run.lease)
    client = RpcClient(home, bridge_command(tmp_path))
    try:
        shown = client.wait_for(is_shown(handle.decision_id), "the decision")
        # No summary: the title is shown once.
        assert shown["message"]["content"].count("Approve the plan?") == 1
        client.send({"id": "cmd", "type": "prompt", "message": "/decision"})
        client.answer_dialog("select", "2. Replan")
        first = client.answer_dialog("input", "")
        assert first["title"] == "What should change? (1-20 characters)"
        client.wait_for(is_notice("The text needs 1 to 20 characters; it has 0."), "the hint")
        client.answer_dialog("input", "x" * 21)
        client.wait_for(is_notice("it has 21."), "the hint again")
        client.answer_dialog("input", "Smaller")
        client.wait_for(is_notice("Accepted: Replan"), "the accepted answer")
    finally:
        code = client.close()
    assert code == 0
    resolved = db.read(lambda c: records.resolution_of(c, handle.decision_id))
    assert resolved is not None and resolved.response == {
        "choice": "replan", "input": {"text": "Smaller"}}
    assert db.conn.execute("SELECT count(*) FROM human_decision_submissions").get == 1
