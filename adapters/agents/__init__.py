"""Agents other than Pi at the tool-call gate: Claude Code's and Codex's PreToolUse hooks and
MCP clients, judged by the same policy and asked through the same decisions. `approvals` is
listed here once a command uses it (the hooks, the MCP server)."""

__all__ = []
