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
import time
from dataclasses import dataclass
from typing import Any, Final, TextIO

from adapters.mcp import protocol, tools
from adapters.mcp.protocol import Message
from state import crashes
from state.version import VERSION

__all__ = ["serve"]


_MAX_LINE: Final = 8 * 1024 * 1024
_MAX_CALLS: Final = 32  # tool calls in flight at once
_JOIN_SECONDS: Final = 5  # a stopped call ends within a second; the client kills at 2 s


class _Server:
    def __init__(self, out: TextIO, session_id: str) -> None:
        self.out, self.lock = out, threading.Lock()
        self.stop = threading.Event()  # stdin closed: every call stops
        self.client = "client"
        self.session_id = session_id
        self.calls: dict[str, _Call] = {}  # by request id, while running

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
        if message.method == "notifications/cancelled":
            self.cancel(message.params.get("requestId"))
        if not message.is_request:
            return  # other notifications (initialized) and responses need no answer
        try:
            self.request(message)
        except Exception as exc:  # a bug: answered, and the loop goes on
            self.send(protocol.error(message.request_id, protocol.INTERNAL_ERROR,
                                     crashes.report_line(exc, f"answering {message.method}")))

    def cancel(self, request_id: Any) -> None:
        """The client gave up on a call (basic/utilities/cancellation.mdx): its wait ends, a
        waiting approval cancels its decision, and no answer is sent."""
        found = self.calls.get(repr(request_id))
        if found is not None:
            found.stop.set()

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
        if len(self.calls) >= _MAX_CALLS:
            self.send(protocol.error(rid, protocol.INTERNAL_ERROR, f"{_MAX_CALLS} tool calls"
                                     " are already running; call again when one is done"))
            return
        if repr(rid) in self.calls:
            self.send(protocol.error(rid, protocol.INVALID_REQUEST, f"Invalid request: id"
                                     f" {rid!r} is already in use by a running call"))
            return
        call = _Call(threading.Thread(target=self.run_tool, args=(rid, str(name), args),
                                      daemon=True), threading.Event())
        self.calls[repr(rid)] = call
        call.thread.start()

    def run_tool(self, rid: Any, name: str, args: dict[str, Any]) -> None:
        stop = self.calls[repr(rid)].stop
        session = tools.Session(self.client, self.session_id, _Either(stop, self.stop))
        try:
            value = protocol.tool_result(tools.call(name, args, session))
        except tools.ToolError as exc:
            value = protocol.tool_result(f"Error: {exc}", is_error=True)
        except Exception as exc:  # the database, the configuration, or a bug: one line
            line = " ".join(str(exc).split()) or crashes.report_line(exc, f"running {name}")
            value = protocol.tool_result(f"Error: {exc.__class__.__name__}: {line}",
                                         is_error=True)
        finally:
            self.calls.pop(repr(rid), None)
        if stop.is_set():
            return  # cancelled: the client no longer waits for this answer
        with contextlib.suppress(OSError, ValueError):  # the client closed: nobody to answer
            self.send(protocol.result(rid, value))


@dataclass(frozen=True, slots=True)
class _Call:
    thread: threading.Thread
    stop: threading.Event  # the client cancelled this call


@dataclass(frozen=True, slots=True)
class _Either:
    """Set when this call is cancelled or the client went away (what tools.Session reads)."""

    call: threading.Event
    server: threading.Event

    def is_set(self) -> bool:
        return self.call.is_set() or self.server.is_set()


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
        end = time.monotonic() + _JOIN_SECONDS
        for call in list(server.calls.values()):
            call.thread.join(max(0.0, end - time.monotonic()))
    print("piw-channels mcp: stdin closed, exiting", file=sys.stderr)
    return 0
