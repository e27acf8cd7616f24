"""Real Pi with a scripted model: `/notify on` (kept across `/reload` and `pi --continue`)
posts a long agent turn to the phone, a progress card while it runs and the result when it
ends, through real `poll` processes and the loopback Bot API. The turn "lasts" 2 min 10 s
by Pi's own clock, moved ahead by a test-only tool; nobody waits for it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from adapters.telegram.fake import FakeBotApi
from state.database import Database
from tests.adapters.pi.mock_model import MockModel, call, say
from tests.adapters.pi.rpc import (
    CLOCK_EXTENSION,
    RpcClient,
    bridge_command,
    is_notice,
    needs_pi,
    wait_until,
)
from tests.channels.telegram.helpers import TOKEN, USER, configure_telegram_profile, run_cli

pytestmark = needs_pi

REPLY = "Migrated 12 tables.\nAll checks green.\n\nDetails follow."


def notifications(db: Database) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in db.conn.execute(
        "SELECT n.run_id, n.notification_type, b.content, n.target_session_id"
        " FROM notifications n JOIN blobs b ON b.blob_hash = n.content_hash"
        " ORDER BY n.created_at, n.notification_index")]


def command(client: RpcClient, text: str, said: str) -> None:
    client.send({"id": "cmd", "type": "prompt", "message": text})
    client.wait_for(is_notice(said), f"the answer to {text}")


def turn(client: RpcClient, model: MockModel, *steps: Any) -> None:
    model.add(*steps)
    client.send({"id": "go", "type": "prompt", "message": "Migrate the database."})
    client.wait_for(lambda m: m.get("type") == "agent_end", "the end of the turn")


def test_notify_on_posts_a_long_turn_s_progress_and_result_to_telegram(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)  # operator -> pi, telegram:ops
        bridge = bridge_command(tmp_path)
        client = RpcClient(home, bridge, session=(), extensions=[CLOCK_EXTENSION])
        try:
            session_id = client.session_id()
            command(client, "/notify", "piw-channels notify: off")
            command(client, "/notify on", "piw-channels notify: on for this session (agent"
                    " turns longer than 2 min are posted)")
            turn(client, model, say("Quick one."))  # shorter than the threshold: nothing
            client.send({"id": "reload", "type": "prompt", "message": "/test-reload"})
            command(client, "/notify", "piw-channels notify: on (agent turns longer than 2 min)")
            turn(client, model, call("test_clock_advance", seconds=130), say(REPLY))
            wait_until(lambda: len(notifications(db)) == 2, "the progress and the result")
        finally:
            assert client.close() == 0
        (run, kind, progress, target), (run2, kind2, final, target2) = notifications(db)
        assert (kind, kind2, run2) == ("progress", "final", run)  # one run: one card
        assert target == target2 == ""  # the session is not told about its own turn
        assert re.fullmatch(r"Working for 2 min 1\d s: 1 tool call so far", progress.decode())
        assert re.fullmatch(r"Done after 2 min 1\d s \(1 tool call\)\.\n\nMigrated 12 tables\."
                            r"\nAll checks green\.\nDetails follow\.", final.decode())
        assert run_cli(home, "poll", "--once").returncode == 0
        card, result = [r.params for r in fake.requests("sendMessage") if r.status == 200]
        short = session_id[:8]
        assert card["text"].startswith(f"In progress: Pi session {short}\n\nWorking for 2 min")
        assert card["disable_notification"] in (True, "true")
        assert result["text"].startswith(f"Finished: Pi session {short}\n\nDone after 2 min")
        assert "All checks green." in result["text"]
        assert f"home · {short} · " in result["text"]  # project · session · host
        [held_card, _] = fake.sent_messages(USER)
        assert result["reply_parameters"]["message_id"] == held_card["message_id"]

        # `pi --continue` keeps the switch; `/notify off` stops the posts.
        client = RpcClient(home, bridge, session=("--continue",), extensions=[CLOCK_EXTENSION])
        try:
            assert client.session_id() == session_id
            command(client, "/notify", "piw-channels notify: on (agent turns longer than 2 min)")
            command(client, "/notify off", "piw-channels notify: off for this session")
            turn(client, model, call("test_clock_advance", seconds=600), say("Long, unseen."))
            client.quiet(lambda m: False, 2)
        finally:
            assert client.close() == 0
        assert len(notifications(db)) == 2


def test_notify_on_says_in_one_line_when_no_telegram_route_would_carry_the_posts(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    # No configuration: the audience `operator` routes to `pi` alone, and a session is never
    # told about its own turns, so the posts would reach no one.
    client = RpcClient(home, bridge_command(tmp_path), session=())
    try:
        client.session_id()
        client.send({"id": "cmd", "type": "prompt", "message": "/notify on"})
        said = client.wait_for(is_notice("piw-channels notify: on"), "the answer to /notify on")
    finally:
        assert client.close() == 0
    assert said["notifyType"] == "warning"
    assert said["message"] == (
        "piw-channels notify: on for this session, but audience operator has no Telegram"
        " route, so nothing reaches the phone (set one up: piw-channels setup telegram)")
