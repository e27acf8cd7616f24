"""Agents other than Pi at the tool-call gate: their PreToolUse hook contracts (hooks) and
one gated call judged, asked and waited for (approvals), shared with the MCP server."""

__all__ = ["approvals", "hook_run", "hooks"]
