"""JSON-RPC 2.0 framing for MCP's stdio transport. Pure functions.

MCP specification 2025-11-25 (modelcontextprotocol/modelcontextprotocol,
docs/specification/2025-11-25/basic/transports.mdx, "stdio"): one JSON-RPC message per line,
UTF-8, no embedded newline; stdout carries only MCP messages, stderr may carry logs.
basic/lifecycle.mdx: `initialize` answers with `protocolVersion` (the client's when we speak
it, else our latest), `capabilities` and `serverInfo`; `notifications/initialized` follows.
server/tools.mdx, "Error Handling": an unknown tool or a malformed request is a JSON-RPC
error (-32602); a tool's own failure (bad arguments, an unknown ticket) is a result with
`isError: true`, so the model can read it and correct itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "Malformed",
    "Message",
    "error",
    "negotiate",
    "parse",
    "result",
    "tool_result",
]


_PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
# The revisions that begin with the `initialize` handshake (lifecycle.mdx), oldest first.
_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
_LATEST_VERSION: Final = _VERSIONS[-1]


class Malformed(ValueError):
    """A line that is not a JSON-RPC message: answered with `code` and `id` (may be None)."""

    def __init__(self, code: int, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.code, self.request_id = code, request_id


@dataclass(frozen=True, slots=True)
class Message:
    """A request (has an id) or a notification (no id) from the client; a response to us
    (we send no request) is ignored by the server."""

    method: str | None
    params: dict[str, Any]
    request_id: Any
    is_request: bool


def parse(line: str) -> Message:
    """One line as a JSON-RPC message, or Malformed saying why (one line)."""
    try:
        doc = json.loads(line)
    except ValueError as exc:
        raise Malformed(_PARSE_ERROR, f"Parse error: the line is not JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise Malformed(INVALID_REQUEST, "Invalid request: a message must be a JSON object"
                        " (batches are not part of MCP)")
    request_id = doc.get("id")
    if doc.get("jsonrpc") != "2.0":
        raise Malformed(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"',
                        request_id)
    if "method" not in doc:  # a response (result or error): nothing we asked for
        return Message(None, {}, request_id, False)
    method, params = doc["method"], doc.get("params", {})
    if not isinstance(method, str):
        raise Malformed(INVALID_REQUEST, 'Invalid request: "method" must be a string',
                        request_id)
    if not isinstance(params, dict):
        raise Malformed(INVALID_REQUEST, 'Invalid request: "params" must be an object',
                        request_id)
    if ("id" in doc and not isinstance(request_id, (str, int))) or isinstance(request_id, bool):
        raise Malformed(INVALID_REQUEST, 'Invalid request: "id" must be a string or an'
                        " integer", None)
    return Message(method, params, request_id, "id" in doc)


def negotiate(requested: Any) -> str:
    """The version to answer `initialize` with (lifecycle.mdx, "Version Negotiation")."""
    return requested if requested in _VERSIONS else _LATEST_VERSION


def result(request_id: Any, value: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": value},
                      ensure_ascii=False)


def error(request_id: Any, code: int, message: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id,
                       "error": {"code": code, "message": message}}, ensure_ascii=False)


def tool_result(value: dict[str, Any] | str, *, is_error: bool = False) -> dict[str, Any]:
    """A `tools/call` result: the text (a JSON object also as structuredContent)."""
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}], "isError": is_error}
    return {"content": [{"type": "text", "text": json.dumps(value, ensure_ascii=False)}],
            "structuredContent": value, "isError": is_error}
