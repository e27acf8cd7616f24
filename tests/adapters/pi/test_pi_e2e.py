"""End to end with real Pi: RPC mode, the extension, its bridge, `/decision`, the database.

No model is needed: an extension command runs before Pi looks for one. The test is the RPC
client (it plays the person answering Pi's dialogs). It needs Node and
`@mariozechner/pi-coding-agent@0.73.1`; set `PIW_PI_BIN` to its `pi` executable (or put `pi`
on PATH), otherwise the test is skipped.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from channels import inbox, messages, store
from channels.decisions import records
from channels.pi import deliveries, sessions
from state import leases
from state.database import Database
from tests.adapters.pi.helpers import ROOT, ask

EXTENSION = ROOT / "adapters" / "pi" / "extension" / "piw-channels.ts"
CUSTOM_TYPE = "piw-channels-decision"


def pi_executable() -> str | None:
    found = os.environ.get("PIW_PI_BIN") or shutil.which("pi")
    if found is None or shutil.which("node") is None:
        return None
    return found


PI = pi_executable()
pytestmark = pytest.mark.skipif(
    PI is None, reason="real Pi not available: install @mariozechner/pi-coding-agent@0.73.1 "
    "with npm and set PIW_PI_BIN to its pi executable (Node >= 20.6 needed)")


class RpcClient:
    """Pi in RPC mode: strict JSON lines on its stdin and stdout."""

    def __init__(self, home: Path, bridge_bin: Path) -> None:
        assert PI is not None
        env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / ".pi/agent"),
               "PIW_CHANNELS_BIN": str(bridge_bin)}
        self.proc = subprocess.Popen(
            [PI, "--mode", "rpc", "--no-session", "--offline", "--no-extensions",
             "-e", str(EXTENSION)],
            cwd=home, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        self._buffer = b""
        self.seen: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def next(self, timeout: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\n", 1)
        message = dict(json.loads(raw.rstrip(b"\r")))
        self.seen.append(message)
        return message

    def wait_for(self, predicate: Any, what: str, timeout: float = 30) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            message = self.next(end - time.monotonic())
            if message is not None and predicate(message):
                return message
        raise AssertionError(f"no {what}; saw {self.seen[-10:]}")

    def answer_dialog(self, method: str, value: str) -> dict[str, Any]:
        request = self.wait_for(lambda m: m.get("type") == "extension_ui_request"
                                and m.get("method") == method, f"{method} dialog")
        self.send({"type": "extension_ui_response", "id": request["id"], "value": value})
        return request

    def close(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()


def bridge_command(tmp_path: Path) -> Path:
    """What the extension runs as `piw-channels`: this checkout with this interpreter."""
    script = tmp_path / "piw-channels"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} -c '
                      f'"from adapters.cli.main import main; main()" "$@"\n')
    script.chmod(0o755)
    return script


def wait_until(check: Any, what: str, timeout: float = 15) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_real_pi_shows_the_decision_and_answers_it_through_decision(
        home: Path, db: Database, tmp_path: Path) -> None:
    handle = ask(db)
    client = RpcClient(home, bridge_command(tmp_path))
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
        picked = client.answer_dialog("select", "1. Approve the plan?")
        assert picked["options"] == ["1. Approve the plan?"]
        choices = client.answer_dialog("select", "2. Replan")
        assert choices["options"] == ["1. Continue", "2. Replan", "3. Stop"]
        prompt = client.answer_dialog("input", "Ship a smaller plan")
        assert prompt["title"] == "What should change?"
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
