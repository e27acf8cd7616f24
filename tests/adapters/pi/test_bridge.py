"""The Pi session bridge, driven by recorded JSON-lines conversations (tests/fixtures/pi/).

Each fixture line is one step: `send` (a message, written as JSON.stringify writes it),
`send_raw` (exact text, optionally in another `encoding`), `expect` (the next line from that
bridge has these fields; "*" accepts any value; optionally `within` seconds), `quiet` (no line for that many seconds),
`do` (a named action of the test: another channel answers, a decision opens), `close` (the
extension closes stdin) and `exit` (the bridge's exit code). `to` names the bridge process
("a" unless given); a process starts at its first step. `{name}` placeholders stand for ids
the test computes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from channels import inbox, messages, store
from channels.decisions import records, resolution, turn_intents, views
from channels.decisions.resolution import HumanAnswer
from channels.decisions.workflows import AskHandle
from channels.pi import deliveries, sessions, settle_view
from state import effects, leases
from state.clock import ManualClock
from state.database import Database
from tests.adapters.pi.helpers import (
    CLI,
    SESSION,
    BridgeProcess,
    ask,
    count,
    route_to_telegram,
)
from tests.conftest import child_env
from tests.paths import FIXTURES as _ALL_FIXTURES
from tests.paths import ROOT

FIXTURES = _ALL_FIXTURES / "pi"
PLACEHOLDER = re.compile(r"\{(\w+)\}")
Actions = dict[str, Callable[[], None]]


class Conversation:
    """Replays one fixture against real bridge processes."""

    def __init__(self, home: Path, names: dict[str, str], actions: Actions) -> None:
        self.home = home
        self.names = names
        self.actions = actions
        self.bridges: dict[str, BridgeProcess] = {}

    def fill(self, value: Any) -> Any:
        if isinstance(value, str):
            return PLACEHOLDER.sub(lambda m: self.names.get(m.group(1), m.group(0)), value)
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        if isinstance(value, dict):
            return {k: self.fill(v) for k, v in value.items()}
        return value

    def bridge(self, name: str) -> BridgeProcess:
        if name not in self.bridges:
            # One secret for all of a conversation's bridges, so raw lines can name `{secret}`.
            secret = self.names.setdefault("secret", os.urandom(32).hex())
            self.bridges[name] = BridgeProcess(self.home, secret=secret)
        return self.bridges[name]

    def run(self, fixture: str) -> None:
        try:
            for number, line in enumerate((FIXTURES / fixture).read_text().splitlines(), 1):
                self.step(json.loads(line), f"{fixture}:{number}")
        finally:
            for process in self.bridges.values():
                process.kill()
        for process in self.bridges.values():
            for raw in process.lines:
                assert_wire_format(raw)

    def step(self, step: dict[str, Any], where: str) -> None:
        bridge = self.bridge(step.get("to", "a")) if "note" not in step and "do" not in step \
            else None
        if "send" in step:
            assert bridge is not None
            bridge.send(self.fill(step["send"]))
        elif "send_raw" in step:
            assert bridge is not None
            bridge.send_raw(self.fill(step["send_raw"]).encode(step.get("encoding", "utf-8")))
        elif "expect" in step:
            assert bridge is not None
            got = bridge.read(timeout=step.get("within", 15))
            assert got is not None, f"{where}: no line; stderr: {stderr_of(bridge)}"
            assert_matches(self.fill(step["expect"]), got, where)
        elif "quiet" in step:
            assert bridge is not None
            got = bridge.read(timeout=step["quiet"])
            assert got is None, f"{where}: unexpected {got}"
        elif "do" in step:
            self.actions[step["do"]]()
        elif "close" in step:
            assert bridge is not None
            bridge.close_stdin()
        elif "exit" in step:
            assert bridge is not None
            assert bridge.wait() == step["exit"], f"{where}: stderr: {stderr_of(bridge)}"


def stderr_of(bridge: BridgeProcess) -> str:
    if bridge.proc.poll() is None or bridge.proc.stderr is None or bridge.proc.stderr.closed:
        return "(running)"
    return bridge.proc.stderr.read().decode(errors="replace")


def assert_matches(expected: Any, got: Any, where: str) -> None:
    if expected == "*":
        return
    if isinstance(expected, dict):
        assert isinstance(got, dict), f"{where}: {got!r} is not an object"
        for key, value in expected.items():
            assert key in got, f"{where}: {key!r} missing in {got}"
            assert_matches(value, got[key], f"{where}.{key}")
        return
    assert got == expected, f"{where}: expected {expected!r}, got {got!r}"


def assert_wire_format(raw: bytes) -> None:
    """Strict JSON lines: one compact ASCII object, LF only."""
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1 and b"\r" not in raw
    assert raw.isascii()
    value = json.loads(raw)
    assert isinstance(value, dict)
    assert raw[:-1] == json.dumps(value, separators=(",", ":")).encode()


# -- fixtures ----------------------------------------------------------------------------------


def names_for(handle: AskHandle, suffix: str = "") -> dict[str, str]:
    channel_id = sessions.session_channel_id(SESSION)
    return {
        f"decision_id{suffix}": handle.decision_id,
        f"request_digest{suffix}": handle.request.request_digest,
        f"message_id{suffix}": deliveries.delivery_message_id(channel_id, handle.decision_id),
    }


@pytest.fixture
def decision(db: Database) -> AskHandle:
    return ask(db)


def converse(home: Path, db: Database, handle: AskHandle, fixture: str,
             actions: Actions | None = None, extra: dict[str, str] | None = None) -> None:
    names = {"session_id": SESSION, **names_for(handle), **(extra or {})}
    Conversation(home, names, actions or {}).run(fixture)


def channel_lease_is_free(db: Database) -> bool:
    resource = store.channel_resource(sessions.session_channel_id(SESSION))
    state = db.read(lambda c: leases.read(c, resource))
    return state is not None and state.owner_type is None


def effect_status(db: Database, effect_type: str, channel_id: str) -> str | None:
    value = db.conn.execute("SELECT status FROM effects WHERE effect_type = ? AND"
                            " idempotency_key = ?", (effect_type, effects.scoped_key(channel_id))
                            ).get
    return None if value is None else str(value)


# -- conversations -----------------------------------------------------------------------------


def test_hello_deliver_acknowledge_answer_settle(home: Path, db: Database,
                                                 decision: AskHandle) -> None:
    converse(home, db, decision, "deliver_ack_answer.jsonl")
    channel_id = sessions.session_channel_id(SESSION)
    assert store.channel_row(db.conn, channel_id) == ("pi", SESSION)
    message = messages.get_message(db.conn, deliveries.delivery_message_id(channel_id,
                                                                        decision.decision_id))
    assert message is not None
    assert (message.status, message.conversation_ref, message.message_ref) == (
        "confirmed", SESSION, "4f1c2a9e")
    assert store.cursor(db.conn, channel_id, deliveries.DELIVERED_CURSOR) == "1"
    key = f"{SESSION}:7d0c1d3a-5b7e-4a55-9a43-1f0e2b6c8d90"
    row = inbox.get_inbox(db.conn, channel_id, key)
    assert row is not None and row.processed_at is not None and row.event_type == "answer"
    assert (row.payload["source"], row.payload["mode"], row.payload["actor"]) == (
        "interactive", "tui", SESSION)
    row = db.conn.execute("SELECT channel, actor_id, idempotency_key FROM"
                                 " human_decision_resolutions").fetchone()
    assert tuple(row) == ("pi", SESSION, key)
    assert db.read(lambda c: records.resolution_of(c, decision.decision_id)).response == {
        "choice": "replan", "input": {"text": "Split step 3 in two"}}
    assert effect_status(db, settle_view.SETTLE_EFFECT, channel_id) == "applied"
    assert channel_lease_is_free(db)


def test_a_duplicate_answer_is_submitted_once(home: Path, db: Database,
                                              decision: AskHandle) -> None:
    converse(home, db, decision, "duplicate_answer.jsonl")
    assert count(db, "SELECT count(*) FROM channel_inbox") == 1
    assert count(db, "SELECT count(*) FROM human_decision_submissions") == 1
    assert count(db, "SELECT count(*) FROM effect_attempts a JOIN effects e USING (effect_id)"
                 " WHERE e.effect_type = 'pi.settle'") == 1


def test_an_answer_from_a_non_interactive_source_is_refused(home: Path, db: Database,
                                                            decision: AskHandle) -> None:
    converse(home, db, decision, "non_interactive_answer.jsonl")
    results = [str(r[0]) for r in db.conn.execute(
        "SELECT result FROM human_decision_submissions ORDER BY submitted_at, rowid")]
    assert results == ["rejected", "won"]
    assert db.read(lambda c: views.view(c, decision.decision_id)).choice == "stop"


def test_a_telegram_answer_wins_and_the_session_is_settled(home: Path, db: Database) -> None:
    route_to_telegram(home)
    handle = ask(db)

    def telegram_answer() -> None:
        outcome = db.write(lambda c: resolution.resolve(c, HumanAnswer(
            handle.decision_id, handle.request.request_digest, {"choice": "stop"},
            "telegram:default", "telegram:42", "update:1001", "callback:piw:abc"),
            db.clock.now_ms(), allowed_channels=("pi", "telegram:default")))
        assert outcome.result.value == "won"

    converse(home, db, handle, "telegram_wins.jsonl", {"telegram_answer": telegram_answer})
    channel_id = sessions.session_channel_id(SESSION)
    assert effect_status(db, settle_view.SETTLE_EFFECT, channel_id) == "applied"
    assert db.conn.execute("SELECT channel FROM human_decision_resolutions").get == (
        "telegram:default")
    assert sorted(str(r[0]) for r in db.conn.execute(
        "SELECT result FROM human_decision_submissions")) == ["already_resolved", "won"]


def test_malformed_lines_get_errors_and_are_never_fatal(home: Path, db: Database,
                                                        decision: AskHandle) -> None:
    converse(home, db, decision, "malformed_lines.jsonl")
    assert db.read(lambda c: records.resolution_of(c, decision.decision_id)).response == {
        "choice": "replan", "input": {"text": "one\u2028two"}}


def test_stdin_closed_mid_conversation_releases_the_lease(home: Path, db: Database,
                                                          decision: AskHandle) -> None:
    converse(home, db, decision, "stdin_closed_mid_line.jsonl")
    channel_id = sessions.session_channel_id(SESSION)
    message = messages.get_message(db.conn, deliveries.delivery_message_id(channel_id,
                                                                        decision.decision_id))
    assert message is not None and message.status == "pending"
    assert channel_lease_is_free(db)


@pytest.mark.parametrize(("bye", "kept"), [
    ({"type": "bye", "reason": "quit"}, False),
    ({"type": "bye", "reason": "new"}, False),  # the window moves on to another session
    ({"type": "bye", "reason": "reload"}, True),
    (None, True),  # no word, and the window lives: taken for a reload
])
def test_the_window_s_bridge_keeps_the_lease_only_for_a_reload(
        home: Path, db: Database, decision: AskHandle, bye: dict[str, str] | None,
        kept: bool) -> None:
    # Pi quitting outlives its bridge for a moment: the bridge must not take that for a
    # /reload and hold the session's lease until it expires (60 s).
    bridge = BridgeProcess(home, window=True)
    try:
        bridge.send({"type": "hello", "session_id": SESSION, "pi_version": "0.73.1",
                     "mode": "tui"})
        shown = bridge.read()
        assert shown is not None and shown["type"] == "deliver"
        if bye is not None:
            bridge.send(bye)
        bridge.close_stdin()
        assert bridge.wait() == 0
    finally:
        bridge.kill()
    assert channel_lease_is_free(db) is not kept


def test_a_second_bridge_for_the_session_waits_for_the_lease(
        home: Path, db: Database, clock: ManualClock, decision: AskHandle) -> None:
    conversation = Conversation(home, {"session_id": SESSION, **names_for(decision)}, {})

    def open_second() -> None:
        clock.advance(1000)  # created later, so delivered after the first one
        conversation.names.update(names_for(ask(db, "Second question"), "_2"))

    conversation.actions["open_second_decision"] = open_second
    conversation.run("second_bridge_waits.jsonl")
    channel_id = sessions.session_channel_id(SESSION)
    assert count(db, "SELECT count(*) FROM channel_messages WHERE channel_id = ?"
                 " AND status = 'confirmed'", channel_id) == 2
    assert store.cursor(db.conn, channel_id, deliveries.DELIVERED_CURSOR) == "2"
    generation = db.conn.execute("SELECT generation FROM leases WHERE resource_id = ?",
                                 (store.channel_resource(channel_id),)).get
    assert generation == 2 and channel_lease_is_free(db)
    assert count(db, "SELECT count(*) FROM channel_inbox") == 1  # `not_ready` wrote nothing


def test_ask_opens_a_bound_decision_and_its_answer_comes_back_as_a_turn(
        home: Path, db: Database) -> None:
    bridge = BridgeProcess(home)
    try:
        bridge.send({"type": "hello", "session_id": SESSION, "pi_version": "0.73.1",
                     "mode": "rpc"})
        bridge.send({"type": "ask", "event_id": "a-1", "title": "Ship it?",
                     "choices": [{"id": "ship", "label": "Ship"},
                                 {"id": "why", "label": "Not yet", "text_prompt": "Why?"}]})
        asked = bridge.read()
        assert asked is not None and asked["type"] == "asked" and asked["event_id"] == "a-1"
        assert asked["delivered_to"] == ["this Pi session"]
        decision_id = asked["decision_id"]
        shown = bridge.read()
        assert shown is not None and (shown["type"], shown["decision_id"]) == (
            "deliver", decision_id)
        bridge.send({"type": "ask", "event_id": "a-2", "title": "Bad", "choices": [
            {"id": "9 lives", "label": "Nine"}]})
        refused = bridge.read()
        assert refused is not None and (refused["type"], refused["code"], refused["event_id"]) \
            == ("error", "invalid_request", "a-2")
        bridge.send({"type": "turned", "turn_intent_id": "turn-nope", "entry_id": "a1b2c3d4"})
        unknown = bridge.read()
        assert unknown is not None and unknown["code"] == "unknown_turn"
        assert db.conn.execute("SELECT origin_session_id FROM run_bindings b JOIN"
                               " human_decisions d USING (run_id) WHERE d.decision_id = ?",
                               (decision_id,)).get == SESSION
        bridge.send({"type": "answer", "decision_id": decision_id,
                     "request_digest": shown["request_digest"], "choice": "why",
                     "input": "Tests are red", "event_id": "e-1", "source": "interactive"})
        got = [bridge.read() for _ in range(3)]
        kinds = {m["type"]: m for m in got if m is not None}
        assert set(kinds) == {"result", "settle", "turn"}
        turn = kinds["turn"]
        assert turn["turn_intent_id"] == turn_intents.turn_intent_id_for(decision_id)
        assert 'Text input (exact JSON): {"text": "Tests are red"}' in turn["content"]
        bridge.send({"type": "turned", "turn_intent_id": turn["turn_intent_id"],
                     "entry_id": "0badc0de"})
        bridge.close_stdin()
        assert bridge.wait() == 0
    finally:
        bridge.kill()
    assert db.read(lambda c: turn_intents.turn_entry(c, turn_intents.turn_intent_id_for(decision_id))) \
        == "0badc0de"
    for raw in bridge.lines:
        assert_wire_format(raw)


def forged_lines(decision: AskHandle, session: str = SESSION) -> bytes:
    hello = {"type": "hello", "session_id": session, "pi_version": "0.73.1", "mode": "rpc",
             "secret": "0" * 64}
    answer = {"type": "answer", "decision_id": decision.decision_id,
              "request_digest": decision.request.request_digest, "choice": "continue",
              "input": None, "event_id": "forged-1", "source": "interactive"}
    return b"".join(json.dumps(m).encode() + b"\n" for m in (hello, answer))


def assert_nothing_recorded(db: Database, decision: AskHandle) -> None:
    assert db.read(lambda c: records.resolution_of(c, decision.decision_id)) is None
    for table in ("channels", "channel_inbox", "channel_messages", "human_decision_submissions"):
        assert count(db, f"SELECT count(*) FROM {table}") == 0, table
    assert count(db, "SELECT count(*) FROM effects WHERE effect_type = 'pi.settle'") == 0


def test_a_bridge_nobody_handed_a_secret_accepts_nothing(home: Path, db: Database,
                                                         decision: AskHandle) -> None:
    # D5: `piw-channels pi bridge` run by hand (or by the agent's bash tool) with a made-up hello.
    done = subprocess.run([*CLI, "pi", "bridge"], input=forged_lines(decision), cwd=ROOT,
                          env=child_env(home), capture_output=True, timeout=60)
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["type"], r["code"]) for r in replies] == [
        ("error", "unverified"), ("error", "hello_required")]
    assert "not started by the Pi extension" in replies[0]["message"]
    assert done.returncode == 0
    assert_nothing_recorded(db, decision)


def test_a_secret_from_anyone_but_the_parent_is_refused(home: Path, db: Database,
                                                        decision: AskHandle) -> None:
    # The socket pair is this test's, but the bridge's parent is a shell in between.
    ours, theirs = socket.socketpair()
    try:
        ours.sendall(b"0" * 64 + b"\n")
        command = " ".join([*(shlex.quote(a) for a in CLI), "pi", "bridge", "--secret-fd",
                            str(theirs.fileno()), "; true"])
        done = subprocess.run(["sh", "-c", command], input=forged_lines(decision), cwd=ROOT,
                              env=child_env(home), capture_output=True, timeout=60,
                              pass_fds=(theirs.fileno(),))
    finally:
        ours.close()
        theirs.close()
    first = json.loads(done.stdout.splitlines()[0])
    assert (first["code"], "does not come from the parent process" in first["message"]) == (
        "unverified", True)
    assert_nothing_recorded(db, decision)


def test_a_hello_with_the_wrong_secret_or_no_pi_session_id_is_refused(
        home: Path, db: Database, decision: AskHandle) -> None:
    bridge = BridgeProcess(home)
    try:
        bridge.send({"type": "hello", "session_id": SESSION, "pi_version": "0.73.1",
                     "mode": "rpc", "secret": "f" * 64})
        wrong = bridge.read()
        assert wrong is not None and wrong["code"] == "unverified"
        assert "does not match" in wrong["message"]
        bridge.send({"type": "hello", "session_id": "made-up", "pi_version": "0.73.1",
                     "mode": "rpc"})
        made_up = bridge.read()
        assert made_up is not None and made_up["message"] == \
            "hello.session_id is not a Pi session id"
    finally:
        bridge.kill()
    assert_nothing_recorded(db, decision)


def test_a_killed_bridge_s_lease_is_taken_over_at_once(home: Path, db: Database,
                                                        decision: AskHandle) -> None:
    # D7: a new bridge used to wait out the dead one's 60 s lease.
    hello = {"type": "hello", "session_id": SESSION, "pi_version": "0.73.1", "mode": "rpc"}
    first = BridgeProcess(home)
    second = BridgeProcess(home)
    try:
        first.send(hello)
        got = first.read()
        assert got is not None and got["type"] == "deliver"
        first.kill()  # SIGKILL: no release
        resource = store.channel_resource(sessions.session_channel_id(SESSION))
        state = db.read(lambda c: leases.read(c, resource))
        assert state is not None and state.is_live(db.clock.now_ms())
        second.send(hello)
        got = second.read()
        assert got is not None and (got["type"], got["decision_id"]) == (
            "deliver", decision.decision_id)
    finally:
        first.kill()
        second.kill()
    events = [str(r[0]) for r in db.conn.execute(
        "SELECT event_type FROM events WHERE resource_id = ? ORDER BY event_seq",
        (resource,))]
    assert "channel.lease_taken_over" in events


def test_the_bridge_applies_a_shown_decision_s_deadline_without_cron(
        home: Path, db: Database) -> None:
    # D9: past its deadline a decision looked answerable in Pi until cron ran `expire`.
    bridge = BridgeProcess(home)
    try:
        bridge.send({"type": "hello", "session_id": SESSION, "pi_version": "0.73.1",
                     "mode": "rpc"})
        bridge.send({"type": "ask", "event_id": "a-1", "title": "Ship it?",
                     "timeout_minutes": 0.02, "default_choice": "ship",
                     "choices": [{"id": "ship", "label": "Ship"}, {"id": "no", "label": "No"}]})
        asked, shown = bridge.read(), bridge.read()
        assert asked is not None and shown is not None and shown["type"] == "deliver"
        got = [bridge.read(timeout=20) for _ in range(2)]
        kinds = {m["type"]: m for m in got if m is not None}
        assert (kinds["settle"]["outcome"], kinds["settle"]["provenance"]) == (
            "accepted", "timeout_policy")
        assert "Outcome: accepted (timed out; the default was taken)" in kinds["turn"]["content"]
    finally:
        bridge.kill()
    assert db.conn.execute("SELECT status FROM runs r JOIN human_decisions d USING (run_id)"
                           " WHERE d.decision_id = ?", (asked["decision_id"],)).get == "completed"
