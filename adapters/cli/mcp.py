"""`piw-channels mcp`: the MCP server over stdio (adapters.mcp), for Claude Code, Codex or any
MCP client. stdout carries only JSON-RPC lines; exit 0 when the client closes stdin, 130 on
Ctrl-C, 143 on SIGTERM (a waiting approval's decision is cancelled first)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

from adapters.cli.errors import raise_terminated
from adapters.mcp import server

__all__ = ["register"]


def _cmd_mcp(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, raise_terminated)
    session = f"mcp-{os.getpid()}-{os.urandom(4).hex()}"  # this connection
    return server.serve(sys.stdin, sys.stdout, session)


def register(sub: Any) -> None:
    """Add `mcp` to the top-level parser."""
    p = sub.add_parser(
        "mcp", help="an MCP server over stdio: ask_human, wait, request_approval",
        description="Serve the Model Context Protocol on stdin/stdout: tools ask_human and"
        " wait (a person's answer on Telegram) and request_approval (the gate policy, and a"
        " person when it asks). Register it in your MCP client as the command"
        " `piw-channels mcp`.")  # fmt: skip
    p.set_defaults(handler=_cmd_mcp)
