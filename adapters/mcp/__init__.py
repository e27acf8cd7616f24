"""`piw-channels mcp`: an MCP server over stdio whose tools ask a person (ask_human, wait) and
put a tool call to the gate (request_approval): JSON-RPC framing (protocol), the tools
(tools) and the stdio loop (server)."""

__all__ = ["server"]
