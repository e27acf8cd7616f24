"""`piw-channels mcp` end to end with the `mcp` Python SDK's own client over stdio: the server is
a real child process, `poll` carries the card to the loopback fake Bot API, a press comes back
as a callback_query update, and the tool results are read as an MCP client reads them."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.client import Client
from mcp.client.stdio import stdio_client

from adapters.telegram.fake import FakeBotApi
from channels.config import gate as gate_config
from channels.decisions import records
from channels.pi import gating
from channels.telegram.buttons import callback_token
from state.database import Database
from tests.channels.telegram.helpers import (
    TOKEN,
    USER,
    config_dir,
    configure_telegram_profile,
    live_keyboards,
    prompt_message,
    reply_to_prompt,
    start_cli,
)
from tests.cli import piw
from tests.conftest import child_env
from tests.paths import ROOT

PUSH = "git push origin main"
CLIENT = types.Implementation(name="test-agent", version="1.0")
CHOICES = [{"id": "ship", "label": "Ship it"}, {"id": "hold", "label": "Hold"}]


@pytest.fixture
def fake(home: Path) -> Iterator[FakeBotApi]:
    with FakeBotApi(token=TOKEN) as server:
        configure_telegram_profile(home, server.base_url)  # operator -> pi, telegram:ops
        assert piw(home, "init").returncode == 0
        yield server


@asynccontextmanager
async def connected(home: Path) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session with `piw-channels mcp` as its child process."""
    params = StdioServerParameters(
        command=sys.executable, args=["-c", "from adapters.cli.main import main; main()", "mcp"],
        env=child_env(home), cwd=ROOT)
    with open(home / "mcp.stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write, client_info=CLIENT) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, /, **args: Any) -> dict[str, Any]:
    done = await session.call_tool(tool, args)
    assert not done.is_error, done.content
    found = done.structured_content
    assert isinstance(found, dict)
    [text] = done.content
    assert isinstance(text, types.TextContent) and json.loads(text.text) == found
    return found


async def failed(session: ClientSession, tool: str, /, **args: Any) -> str:
    """The one line of a tool's isError result."""
    done = await session.call_tool(tool, args)
    assert done.is_error, done
    [text] = done.content
    assert isinstance(text, types.TextContent) and "\n" not in text.text
    return text.text


def poll(home: Path) -> None:
    done = piw(home, "poll", "--once", process=True)
    assert done.returncode == 0, done.stderr


async def poll_soon(home: Path) -> None:
    await asyncio.to_thread(poll, home)


def press(fake: FakeBotApi, decision_id: str, choice: str, card: int | None = None) -> int:
    """The person presses `choice` on the card their phone shows (or on message `card` as a
    phone that has not redrawn it yet shows it); the card's message id."""
    with Database.open_reader() as db:
        digest = db.read(lambda c: records.load(c, decision_id)).request.request_digest
    token = callback_token(decision_id, digest, choice)
    if card is None:
        [card] = [int(k["message_id"]) for k in fake.keyboards() if any(
            b.get("callback_data") == token for row in k["inline_keyboard"] for b in row)]
    fake.push_fixture("callback_press.json", {
        "user_id": USER, "chat_id": USER, "message_id": card, "message_text": "decision",
        "callback_data": token})
    return card


def resolutions() -> list[tuple[Any, ...]]:
    with Database.open_reader() as db:
        return [tuple(r) for r in db.conn.execute(
            "SELECT decision_id, outcome, provenance, channel, reason"
            " FROM human_decision_resolutions")]


def gate_decisions() -> list[str]:
    with Database.open_reader() as db:
        return [str(d) for (d,) in db.conn.execute(
            "SELECT d.decision_id FROM human_decisions d JOIN runs r USING (run_id)"
            " WHERE r.workflow_ref = 'piw-channels.gate'")]


async def opened_gate_decision(task: asyncio.Task[Any]) -> str:
    end = time.monotonic() + 60
    while not gate_decisions():
        assert not task.done(), task.result()
        assert time.monotonic() < end, "no decision opened"
        await asyncio.sleep(0.05)
    [decision_id] = gate_decisions()
    return decision_id


def enable_gate(home: Path, **changes: Any) -> None:
    gate_config.write_gate_policy(config_dir(home), dataclasses.replace(
        gate_config.DEFAULT_POLICY, enabled=True, **changes))


def test_ask_gets_a_ticket_and_wait_receives_the_press_exactly_once(
        home: Path, fake: FakeBotApi) -> None:
    async def scenario() -> None:
        async with connected(home) as session:
            listed = await session.list_tools()
            assert [t.name for t in listed.tools] == ["ask_human", "wait", "request_approval"]
            asked = await call(session, "ask_human", title="Ship v2 to production?",
                               choices=CHOICES)
            ticket = asked["ticket"]
            assert asked == {"ticket": ticket, "status": "pending", "deadline_at_ms": None}
            assert await call(session, "wait", ticket=ticket, timeout=0) == {
                "ticket": ticket, "status": "pending"}
            await poll_soon(home)
            shown = "\n".join(str(m.get("text", "")) for m in fake.sent_messages(USER))
            assert "Ship v2 to production?" in shown
            waiting = asyncio.create_task(call(session, "wait", ticket=ticket, timeout=60))
            await asyncio.sleep(0.3)
            assert not waiting.done()  # the wait blocks until the person answers
            card = press(fake, ticket, "ship")
            await poll_soon(home)
            answer = await asyncio.wait_for(waiting, 30)
            assert answer["status"] == "answered" and answer["by"] == "human"
            assert (answer["choice"], answer["label"], answer["channel"]) == (
                "ship", "Ship it", "telegram:ops")
            assert str(USER) not in json.dumps(answer)  # never the person's numeric id
            press(fake, ticket, "hold", card)  # a second press, from a stale card, changes nothing
            await poll_soon(home)
            assert await call(session, "wait", ticket=ticket, timeout=0) == answer
        assert resolutions() == [(ticket, "accepted", "human", "telegram:ops", None)]
        with Database.open_reader() as db:
            subject = db.read(lambda c: records.load(c, ticket)).request.document["subject"]
            assert db.conn.execute("SELECT status FROM runs").get == "completed"
        assert subject["agent"] == "mcp:test-agent"
        listed_rows = piw(home, "decisions", "--all")
        assert "mcp:test-agent" in listed_rows.stdout, listed_rows.stdout
        assert live_keyboards(fake.keyboards()) == []  # the card is settled

    asyncio.run(scenario())


def test_an_unanswered_ask_with_a_deadline_gets_its_default(home: Path, fake: FakeBotApi) -> None:
    async def scenario() -> None:
        async with connected(home) as session:
            asked = await call(session, "ask_human", title="Rotate the keys?", choices=CHOICES,
                               deadline_seconds=60, default_choice="hold")
            assert isinstance(asked["deadline_at_ms"], int)
            await poll_soon(home)
            late = piw(home, "poll", "--once", minutes=2, process=True)  # the deadline has passed
            assert late.returncode == 0, late.stderr
            answer = await call(session, "wait", ticket=asked["ticket"], timeout=5)
            assert (answer["status"], answer["choice"], answer["by"]) == (
                "defaulted", "hold", "timeout")

    asyncio.run(scenario())


def test_a_poll_killed_after_the_card_went_out_loses_nothing(
        home: Path, fake: FakeBotApi) -> None:
    async def scenario() -> None:
        async with connected(home) as session:
            ticket = (await call(session, "ask_human", title="Merge the release branch?",
                                 choices=CHOICES))["ticket"]
            poller = start_cli(home, "poll", "--for", "60")
            try:
                end = time.monotonic() + 30
                while not fake.sent_messages(USER):
                    assert time.monotonic() < end, "the card was not sent"
                    await asyncio.sleep(0.05)
            finally:
                poller.send_signal(signal.SIGKILL)
                poller.communicate(timeout=30)
            await poll_soon(home)  # the next cron pass finishes what the killed one started
            press(fake, ticket, "hold")
            await poll_soon(home)
            answer = await call(session, "wait", ticket=ticket, timeout=30)
            assert (answer["status"], answer["choice"]) == ("answered", "hold")
        assert len(resolutions()) == 1

    asyncio.run(scenario())


def test_request_approval_allowed_on_the_phone(home: Path, fake: FakeBotApi) -> None:
    enable_gate(home)

    async def scenario() -> None:
        async with connected(home) as session:
            asking = asyncio.create_task(call(session, "request_approval", tool="Bash",
                                              input={"command": PUSH}, cwd=str(home)))
            decision_id = await opened_gate_decision(asking)
            await poll_soon(home)
            card = "\n".join(str(m.get("text", "")) for m in fake.sent_messages(USER))
            assert "test-agent (MCP) wants to run a command" in card
            assert PUSH in card and str(home) in card
            press(fake, decision_id, gating.ALLOW)
            await poll_soon(home)
            verdict = await asyncio.wait_for(asking, 30)
            assert verdict == {"decision": "allow", "reason": "Allowed on Telegram",
                               "choice": gating.ALLOW, "decision_id": decision_id}
        assert resolutions() == [(decision_id, "accepted", "human", "telegram:ops", None)]

    asyncio.run(scenario())


def test_request_approval_unanswered_in_time_is_denied(home: Path, fake: FakeBotApi) -> None:
    enable_gate(home, timeout_minutes=0.5)

    async def scenario() -> None:
        async with connected(home) as session:
            asking = asyncio.create_task(call(session, "request_approval", tool="Bash",
                                              input={"command": PUSH}, cwd=str(home)))
            await opened_gate_decision(asking)
            await poll_soon(home)
            late = piw(home, "poll", "--once", minutes=1, process=True)  # past the policy's 30 seconds
            assert late.returncode == 0, late.stderr
            verdict = await asyncio.wait_for(asking, 30)
            assert verdict["decision"] == "deny"
            assert verdict["reason"] == "Denied: no answer within 30 seconds"
        assert [r[1:3] for r in resolutions()] == [("accepted", "timeout_policy")]

    asyncio.run(scenario())


def test_a_call_the_policy_allows_is_answered_at_once(home: Path, fake: FakeBotApi) -> None:
    enable_gate(home)

    async def scenario() -> None:
        async with connected(home) as session:
            verdict = await call(session, "request_approval", tool="Bash",
                                 input={"command": "ls -la"}, cwd=str(home))
            assert verdict["decision"] == "allow" and verdict["decision_id"] is None
            state = home / ".pi" / "agent" / "workflows" / "state.sqlite"
            blocked = await call(session, "request_approval", tool="Bash", cwd=str(home),
                                 input={"command": f"sqlite3 {state} 'DELETE FROM runs'"})
            assert blocked["decision"] == "deny" and blocked["reason"].startswith("Blocked")
        assert gate_decisions() == [] and fake.sent_messages(USER) == []

    asyncio.run(scenario())


def test_a_client_that_goes_away_cancels_its_waiting_approval(
        home: Path, fake: FakeBotApi) -> None:
    enable_gate(home)

    async def scenario() -> str:
        async with connected(home) as session:
            asking = asyncio.create_task(session.call_tool("request_approval", {
                "tool": "Bash", "input": {"command": PUSH}, "cwd": str(home)}))
            decision_id = await opened_gate_decision(asking)
            await poll_soon(home)
            asking.cancel()
        return decision_id  # the client closed the server's stdin on the way out

    decision_id = asyncio.run(scenario())
    assert resolutions() == [(decision_id, "cancelled", "explicit_cancel", None,
                              "the MCP client stopped waiting")]
    poll(home)
    assert live_keyboards(fake.keyboards()) == []  # its card settles


def test_tool_mistakes_come_back_as_one_line_errors(home: Path, fake: FakeBotApi) -> None:
    async def scenario() -> None:
        async with connected(home) as session:
            assert await failed(session, "ask_human", title="", choices=CHOICES) == (
                "Error: title must be a non-empty string")
            assert "choices must be a non-empty list" in await failed(
                session, "ask_human", title="Go?", choices=[])
            assert "is invalid" in await failed(session, "ask_human", title="Go?",
                                                choices=[{"id": "no way", "label": "x"}])
            assert "default_choice needs deadline_seconds" in await failed(
                session, "ask_human", title="Go?", choices=CHOICES, default_choice="ship")
            assert "unknown ticket 'nope'" in await failed(session, "wait", ticket="nope")
            assert "timeout must be a number" in await failed(session, "wait", ticket="x",
                                                                timeout=601)
            assert "cwd must be an absolute path" in await failed(
                session, "request_approval", tool="Bash", input={"command": "ls"}, cwd="tmp")
        with Database.open_reader() as db:
            assert db.conn.execute("SELECT count(*) FROM human_decisions").get == 0

    asyncio.run(scenario())


def test_with_no_telegram_configured_ask_says_nobody_can_be_asked(home: Path) -> None:
    async def scenario() -> None:
        async with connected(home) as session:
            line = await failed(session, "ask_human", title="Go?", choices=CHOICES)
            assert line.startswith("Error: nobody can be asked (")

    asyncio.run(scenario())


def test_a_call_the_client_cancels_cancels_its_decision_and_the_session_goes_on(
        home: Path, fake: FakeBotApi) -> None:
    enable_gate(home)

    async def scenario() -> str:
        async with connected(home) as session:
            asking = asyncio.create_task(session.call_tool("request_approval", {
                "tool": "Bash", "input": {"command": PUSH}, "cwd": str(home)}))
            decision_id = await opened_gate_decision(asking)
            asking.cancel()  # the SDK sends notifications/cancelled for the abandoned call
            end = time.monotonic() + 30
            while not resolutions():
                assert time.monotonic() < end, "the cancelled call's decision stayed open"
                await asyncio.sleep(0.05)
            await session.send_ping()  # the server still answers
            again = await call(session, "request_approval", tool="Bash",
                               input={"command": "ls"}, cwd=str(home))
            assert again["decision"] == "allow"
        return decision_id

    decision_id = asyncio.run(scenario())
    assert resolutions() == [(decision_id, "cancelled", "explicit_cancel", None,
                              "the MCP client stopped waiting")]


def test_the_sdks_default_client_falls_back_from_discover_to_the_handshake(
        home: Path, fake: FakeBotApi) -> None:
    # SDK 2.x's Client probes `server/discover` (the 2026-07-28 revision) first; we answer
    # "Method not found" and it continues with `initialize`.
    params = StdioServerParameters(
        command=sys.executable, args=["-c", "from adapters.cli.main import main; main()", "mcp"],
        env=child_env(home), cwd=ROOT)

    async def scenario() -> None:
        async with Client(params, client_info=CLIENT) as client:
            assert client.session.protocol_version == "2025-11-25"
            done = await client.call_tool("ask_human", {"title": "Go?", "choices": CHOICES})
            assert not done.is_error and done.structured_content is not None
            assert done.structured_content["status"] == "pending"

    asyncio.run(scenario())


def test_a_typed_answer_comes_back_as_text(home: Path, fake: FakeBotApi) -> None:
    async def scenario() -> None:
        async with connected(home) as session:
            ticket = (await call(session, "ask_human", title="Approve the plan?",
                                 choices=[{"id": "go", "label": "Continue"}],
                                 text_choice={"id": "replan", "label": "Replan",
                                              "prompt": "What should change?"}))["ticket"]
            await poll_soon(home)
            press(fake, ticket, "replan")
            await poll_soon(home)  # the ForceReply prompt goes out
            prompt = prompt_message(ticket)
            assert prompt is not None
            reply_to_prompt(fake, prompt[0], prompt[1], "use the staging db\nand retry")
            await poll_soon(home)
            answer = await call(session, "wait", ticket=ticket, timeout=10)
            assert (answer["status"], answer["choice"], answer["label"], answer["text"]) == (
                "answered", "replan", "Replan", "use the staging db\nand retry")

    asyncio.run(scenario())
