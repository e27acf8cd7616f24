"""`piw-channels hook claude-code` and `piw-channels hook codex`: an agent's PreToolUse hook
(and Codex's PermissionRequest hook: its own approval prompt, answered from the phone).

    stdin   the hook's JSON (adapters.agents.hooks names each agent's contract;
            adapters.agents.hook_run judges, asks and answers: this module names the agent
            and turns SIGTERM into a stop)
    stdout  Claude Code: its decision JSON (allow after a person's allow, deny with the
            reason), or nothing when the gate has nothing to say; Codex: nothing, but for
            a PermissionRequest its decision JSON (allow, or deny with the reason)
    stderr  one line when the call is refused through exit 2 (Codex) or cannot be judged
    exit    0, or 2 (the agents' blocking error: the call is not run) for bad input, an
            internal error, a Codex refusal, or a hook stopped while it waited

The call is judged by gate.json's policy (guard + policy; no sandbox: we do not run the
agent's bash). A gated call opens the gate's decision and waits, holding its run, up to the
policy's timeout while `poll` carries the card; no answer in time denies. A broken gate.json
denies what it would ask about; an unreadable database or no Telegram chat to ask denies with
the reason: never an allow. SIGTERM or Ctrl-C while waiting (the agent gave up) cancels the
decision, so its card settles. A PermissionRequest is Codex asking for a person itself: it is
asked on Telegram even where the policy would let the call through (the guard still blocks
first), unless a person allowed the same command in the same session moments ago (its
PreToolUse hook, just before).
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from adapters.agents import hook_run, hooks
from adapters.cli.errors import Terminated, raise_terminated

__all__ = ["register"]


def _cmd_hook(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, raise_terminated)  # a stop while it waits cancels the ask
    answer = hook_run.run(args.agent, sys.stdin, stops=(KeyboardInterrupt, Terminated))
    sys.stdout.write(answer.stdout)
    sys.stderr.write(answer.stderr)
    return answer.exit_code


def register(sub: Any) -> None:
    """Add `hook claude-code` and `hook codex` to the top-level parser."""
    hook = sub.add_parser(
        "hook", help="an agent's PreToolUse hook: gated tool calls wait for a person",
        description="Read the agent's PreToolUse hook JSON on stdin, judge the call by the"
        " gate policy, ask a person on Telegram when the policy says so, and answer as the"
        " agent's hook contract documents.",
    )  # fmt: skip
    agents = hook.add_subparsers(dest="agent", metavar="AGENT")
    agents.required = True
    for agent, text in ((hooks.CLAUDE_CODE, "Claude Code's PreToolUse command hook"),
                        (hooks.CODEX, "Codex's PreToolUse command hook (it can only refuse)")):
        p = agents.add_parser(agent, help=text, description=text)
        p.set_defaults(handler=_cmd_hook, agent=agent)
