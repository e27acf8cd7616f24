"""`piw-channels hook claude-code` and `piw-channels hook codex`: an agent's PreToolUse hook
(and Codex's PermissionRequest hook: its own approval prompt, answered from the phone).

    stdin   the hook's JSON (adapters.agents.hooks names each agent's contract)
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
import socket
import sys
from typing import Any

from adapters.agents import approvals, hooks
from adapters.agents.approvals import Opened, Verdict
from adapters.cli.errors import Terminated, raise_terminated
from channels.config.errors import ConfigError
from channels.config.loading import resolve_config_dir
from channels.decisions import workflows
from channels.errors import ChannelsError
from state import crashes
from state.database import Database
from state.errors import StateError

__all__ = ["register"]


_NAMES = {hooks.CLAUDE_CODE: "Claude Code", hooks.CODEX: "Codex"}


def _cmd_hook(args: argparse.Namespace) -> int:
    agent: str = args.agent
    try:
        hook = hooks.parse(_read_stdin(), agent)
    except hooks.BadInput as exc:
        return _emit(hooks.Answer("", f"Error: {exc}; the call was not run\n", hooks.BLOCKING))
    try:
        verdict = _decide(agent, hook)
    except (KeyboardInterrupt, Terminated):
        return _emit(hooks.Answer("", "Denied: the hook was stopped before a person answered"
                                  " (the decision is cancelled)\n", hooks.BLOCKING))
    except Exception as exc:  # a bug: never let the call through (exit 1 would)
        line = crashes.report_line(exc, f"running hook {agent}")
        return _emit(hooks.Answer("", f"Error: {line}; the call was not run\n",
                                  hooks.BLOCKING))
    return _emit(hooks.answer(agent, verdict, hook.event))


def _read_stdin() -> str:
    data = sys.stdin.read(hooks.MAX_INPUT_BYTES + 1)
    if len(data) > hooks.MAX_INPUT_BYTES:
        raise hooks.BadInput(f"the hook input is longer than {hooks.MAX_INPUT_BYTES:,}"
                             " characters")
    return data


def _decide(agent: str, hook: hooks.HookCall) -> Verdict:
    """Judge, ask, wait: a Verdict in every case but an interruption."""
    signal.signal(signal.SIGTERM, raise_terminated)
    host = socket.gethostname()
    subject, judged = hooks.calls(hook, agent, host)
    try:
        db = Database.open_writer()
    except (StateError, OSError) as exc:
        return _unusable(exc)
    try:
        owner_id = workflows.new_owner_id(db, "hook")
        prompt = hook.event == hooks.PERMISSION_REQUEST  # the agent's own approval prompt
        try:
            if prompt:
                earlier = approvals.allowed_just_now(db, hooks.pre_tool_use_form(
                    hook, agent, host), hook.session_id)
                if earlier is not None:
                    return earlier
            found = approvals.open_call(db, subject, session_id=hook.session_id,
                                        owner_id=owner_id, config_dir=resolve_config_dir(),
                                        judged=judged, always_ask=prompt)
            if isinstance(found, Verdict):
                return found
            return _wait(db, found, owner_id, _NAMES[agent])
        except (StateError, ChannelsError, ConfigError) as exc:
            return _unusable(exc)
    finally:
        db.close()


def _wait(db: Database, opened: Opened, owner_id: str, name: str) -> Verdict:
    try:
        verdict = approvals.wait_call(db, opened)
    except (KeyboardInterrupt, Terminated):
        approvals.cancel_call(db, opened, f"{name} stopped waiting for the answer", owner_id)
        raise
    assert verdict is not None  # no `until_ms`: it waits for the answer or the deadline
    return verdict


def _unusable(exc: Exception) -> Verdict:
    reason = " ".join(str(exc).split())
    return Verdict(False, f"Denied: the gate could not be used ({reason})", None, None, None)


def _emit(answer: hooks.Answer) -> int:
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
