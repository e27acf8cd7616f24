"""`piw-channels mcp` on the wire: a real child process fed raw lines on stdin, its stdout read
line by line as JSON-RPC (MCP 2025-11-25, basic/transports.mdx "stdio"): bad input gets a
specific error and the loop goes on; EOF ends the server with 0 and nothing but messages on
stdout."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from adapters.mcp import protocol
from tests import readme_blocks
from tests.cli import CLI, piw
from tests.conftest import child_env
from tests.paths import ROOT


def exchange(home: Path, *lines: str) -> tuple[list[dict[str, Any]], str, int]:
    """Send `lines`, close stdin; every stdout line parsed, stderr, the exit code."""
    done = subprocess.run([*CLI, "mcp"], cwd=ROOT, env=child_env(home), capture_output=True,
                          text=True, input="".join(line + "\n" for line in lines), timeout=60)
    return [json.loads(line) for line in done.stdout.splitlines()], done.stderr, done.returncode


def request(rid: int, method: str, params: Any = None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message)


INITIALIZE = request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "raw", "version": "0"}})
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})


def test_the_handshake_negotiates_the_clients_version_and_lists_three_tools(home: Path) -> None:
    answers, err, code = exchange(home, INITIALIZE, INITIALIZED, request(2, "ping"),
                                  request(3, "tools/list"))
    assert code == 0 and err == "piw-channels mcp: stdin closed, exiting\n"
    hello, pong, listed = answers
    assert hello["id"] == 1 and hello["result"]["protocolVersion"] == "2025-06-18"
    assert hello["result"]["serverInfo"]["name"] == "piw-channels"
    assert hello["result"]["capabilities"] == {"tools": {"listChanged": False}}
    assert pong == {"jsonrpc": "2.0", "id": 2, "result": {}}
    tools = listed["result"]["tools"]
    assert [t["name"] for t in tools] == ["ask_human", "wait", "request_approval"]
    assert all(t["inputSchema"]["type"] == "object" and t["description"] for t in tools)


def test_an_unknown_version_is_answered_with_the_latest_we_speak(home: Path) -> None:
    [hello], _, _ = exchange(home, request(1, "initialize", {"protocolVersion": "1999-01-01"}))
    assert hello["result"]["protocolVersion"] == "2025-11-25"


def test_bad_lines_get_specific_errors_and_the_server_goes_on(home: Path) -> None:
    answers, _, code = exchange(
        home, "this is not json", "[1, 2]", json.dumps({"jsonrpc": "1.0", "id": 4,
                                                        "method": "ping"}),
        json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping", "params": [1]}),
        json.dumps({"jsonrpc": "2.0", "id": True, "method": "ping"}),
        request(6, "resources/list"),
        request(7, "tools/call", {"name": "rm_rf", "arguments": {}}),
        request(8, "tools/call", {"name": "wait", "arguments": "ticket"}),
        request(9, "ping"))
    assert code == 0
    assert [(a.get("id"), a.get("error", {}).get("code")) for a in answers] == [
        (None, -32700), (None, protocol.INVALID_REQUEST), (4, protocol.INVALID_REQUEST),
        (5, protocol.INVALID_REQUEST), (None, protocol.INVALID_REQUEST),
        (6, protocol.METHOD_NOT_FOUND), (7, protocol.INVALID_PARAMS),
        (8, protocol.INVALID_PARAMS), (9, None)]
    messages = [a["error"]["message"] for a in answers[:-1]]
    assert messages[0].startswith("Parse error: the line is not JSON")
    assert "batches are not part of MCP" in messages[1]
    assert messages[6] == "Unknown tool: 'rm_rf' (tools: ask_human, request_approval, wait)"
    assert all("\n" not in m for m in messages)


def test_a_tool_error_is_a_result_the_model_can_read(home: Path) -> None:
    wait = request(2, "tools/call", {"name": "wait", "arguments": {"ticket": "dec-unknown"}})
    [_, early], _, _ = exchange(home, INITIALIZE, wait)
    [text] = early["result"]["content"]
    assert early["result"]["isError"] and text["text"].endswith("; run: piw-channels init")
    assert piw(home, "init").returncode == 0
    answers, _, _ = exchange(home, INITIALIZE, wait)
    result = answers[1]["result"]
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "Error: unknown ticket"
                                  " 'dec-unknown': give a ticket ask_human returned"}]


def test_a_response_and_a_notification_get_no_answer(home: Path) -> None:
    answers, _, code = exchange(
        home, json.dumps({"jsonrpc": "2.0", "id": 99, "result": {}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 12345}}), "", request(1, "ping"))
    assert code == 0 and answers == [{"jsonrpc": "2.0", "id": 1, "result": {}}]


def test_the_readme_mcp_rehearsal_runs_word_for_word_on_a_fresh_home(tmp_path: Path) -> None:
    script = readme_blocks.block("by writing the client's lines by\nhand:")
    done = readme_blocks.run(tmp_path, script, "8767", readme_blocks.free_port())
    assert (done.returncode, done.stderr.count("stdin closed")) == (0, 2), done.stderr
    [_, answered] = [json.loads(line) for line in done.stdout.splitlines()
                     if line.startswith('{"jsonrpc"')]
    found = answered["result"]["structuredContent"]
    assert (found["status"], found["choice"], found["label"], found["by"]) == (
        "answered", "ship", "Ship it", "human")
    assert re.search(r"^decision-\S+ .* mcp:try .* accepted +Ship it .*Ship v2\?$",
                     done.stdout, re.M), done.stdout
