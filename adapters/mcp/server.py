"""The stdio loop of `piw-channels mcp`: read one JSON-RPC message a line, answer each
request, run each tool call in a thread of its own (a wait must not hold up a ping), write
whole lines under one lock. Bad input gets a JSON-RPC error or an isError result and the
loop goes on; EOF on stdin stops every wait (a waiting approval cancels its decision) and
returns 0. Logs go to stderr only.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Final, TextIO

from adapters.mcp import protocol, tools
from adapters.mcp.protocol import Message
from state import crashes
from state.version import VERSION

__all__ = ["serve"]


_MAX_LINE: Final = 8 * 1024 * 1024
_MAX_CALLS: Final = 32  # tool calls in flight at once
_JOIN_SECONDS: Final = 30


class _Server:
    def __init__(self, out: TextIO, session_id: str) -> None:
        self.out, self.lock = out, threading.Lock()
        self.stop = threading.Event()
        self.client = "client"
        self.session_id = session_id
        self.calls: list[threading.Thread] = []

    def send(self, line: str) -> None:
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()

    def handle(self, line: str) -> None:
        try:
            message = protocol.parse(line)
        except protocol.Malformed as exc:
            self.send(protocol.error(exc.request_id, exc.code, str(exc)))
            return
        if not message.is_request:
            return  # notifications (initialized, cancelled) and responses need no answer
        try:
            self.request(message)
        except Exception as exc:  # a bug: answered, and the loop goes on
            self.send(protocol.error(message.request_id, protocol.INTERNAL_ERROR,
                                     crashes.report_line(exc, f"answering {message.method}")))

    def request(self, message: Message) -> None:
        rid, params = message.request_id, message.params
        if message.method == "initialize":
            info = params.get("clientInfo")
            name = info.get("name") if isinstance(info, dict) else None
            if isinstance(name, str) and name.strip():
                self.client = name.strip()
            self.send(protocol.result(rid, {
                "protocolVersion": protocol.negotiate(params.get("protocolVersion")),
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "piw-channels", "version": VERSION}}))
        elif message.method == "ping":
            self.send(protocol.result(rid, {}))
        elif message.method == "tools/list":
            self.send(protocol.result(rid, {"tools": tools.DEFINITIONS}))
        elif message.method == "tools/call":
            self.tool_call(rid, params)
        else:
            self.send(protocol.error(rid, protocol.METHOD_NOT_FOUND,
                                     f"Method not found: {message.method}"))

    def tool_call(self, rid: Any, params: dict[str, Any]) -> None:
        name, args = params.get("name"), params.get("arguments", {})
        known = {t["name"] for t in tools.DEFINITIONS}
        if name not in known:
            self.send(protocol.error(rid, protocol.INVALID_PARAMS, f"Unknown tool: {name!r}"
                                     f" (tools: {', '.join(sorted(known))})"))
            return
        if not isinstance(args, dict):
            self.send(protocol.error(rid, protocol.INVALID_PARAMS,
                                     '"arguments" must be an object'))
            return
        self.calls = [t for t in self.calls if t.is_alive()]
        if len(self.calls) >= _MAX_CALLS:
            self.send(protocol.error(rid, protocol.INTERNAL_ERROR, f"{_MAX_CALLS} tool calls"
                                     " are already running; call again when one is done"))
            return
        thread = threading.Thread(target=self.run_tool, args=(rid, str(name), args),
                                  daemon=True)
        self.calls.append(thread)
        thread.start()

    def run_tool(self, rid: Any, name: str, args: dict[str, Any]) -> None:
        session = tools.Session(self.client, self.session_id, self.stop)
        try:
            value = protocol.tool_result(tools.call(name, args, session))
        except tools.ToolError as exc:
            value = protocol.tool_result(f"Error: {exc}", is_error=True)
        except Exception as exc:  # the database, the configuration, or a bug: one line
            line = " ".join(str(exc).split()) or crashes.report_line(exc, f"running {name}")
            value = protocol.tool_result(f"Error: {exc.__class__.__name__}: {line}",
                                         is_error=True)
        with contextlib.suppress(OSError, ValueError):  # the client closed: nobody to answer
            self.send(protocol.result(rid, value))


def serve(stdin: TextIO, stdout: TextIO, session_id: str) -> int:
    """Answer the client until stdin closes; 0."""
    server = _Server(stdout, session_id)
    try:
        while True:
            line = stdin.readline(_MAX_LINE + 1)
            if not line:
                break
            if len(line) > _MAX_LINE:
                server.send(protocol.error(None, protocol.INVALID_REQUEST,
                                           f"Invalid request: a line longer than {_MAX_LINE:,}"
                                           " characters"))
                while line and not line.endswith("\n"):  # skip the rest of that line
                    line = stdin.readline(_MAX_LINE)
                continue
            if line.strip():
                server.handle(line)
    finally:
        server.stop.set()  # waits end; a waiting approval cancels its decision
        for thread in server.calls:
            thread.join(_JOIN_SECONDS)
    print("piw-channels mcp: stdin closed, exiting", file=sys.stderr)
    return 0
