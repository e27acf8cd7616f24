"""One agent hook call from its stdin to its answer: read and parse the hook JSON, judge the
call by the gate policy, ask a person and wait when the policy says so, and answer as the
agent's hook contract reads it (adapters.agents.hooks). `piw-channels hook` only names the
agent and routes SIGTERM.

Every failure is an answer, never an exception: bad input, an unusable gate (unreadable
database, broken gate.json, no Telegram chat to ask), a bug, or the hook stopped while it
waited (the decision is then cancelled, so its card settles) all deny; never an allow.
"""

from __future__ import annotations

import socket
from typing import TextIO

from adapters.agents import approvals, hooks
from adapters.agents.approvals import Opened, Verdict
from channels.config.errors import ConfigError
from channels.config.loading import resolve_config_dir
from channels.decisions import workflows
from channels.errors import ChannelsError
from state import crashes
from state.database import Database
from state.errors import StateError

__all__ = ["run"]


_NAMES = {hooks.CLAUDE_CODE: "Claude Code", hooks.CODEX: "Codex"}
_Stops = tuple[type[BaseException], ...]


def run(agent: str, stdin: TextIO, *, stops: _Stops = (KeyboardInterrupt,)) -> hooks.Answer:
    """The answer to the hook call `agent` (hooks.CLAUDE_CODE or hooks.CODEX) reads on
    `stdin`. `stops` are the exceptions that mean the hook was told to stop (Ctrl-C, and
    whatever the caller's SIGTERM handler raises): one of them while it waits cancels the
    decision and denies."""
    try:
        hook = hooks.parse(_read(stdin), agent)
    except hooks.BadInput as exc:
        return hooks.Answer("", f"Error: {exc}; the call was not run\n", hooks.BLOCKING)
    try:
        verdict = _decide(agent, hook, stops)
    except stops:
        return hooks.Answer("", "Denied: the hook was stopped before a person answered"
                            " (the decision is cancelled)\n", hooks.BLOCKING)
    except Exception as exc:  # a bug: never let the call through (exit 1 would)
        line = crashes.report_line(exc, f"running hook {agent}")
        return hooks.Answer("", f"Error: {line}; the call was not run\n", hooks.BLOCKING)
    return hooks.answer(agent, verdict, hook.event)


def _read(stdin: TextIO) -> str:
    data = stdin.read(hooks.MAX_INPUT_BYTES + 1)
    if len(data) > hooks.MAX_INPUT_BYTES:
        raise hooks.BadInput(f"the hook input is longer than {hooks.MAX_INPUT_BYTES:,}"
                             " characters")
    return data


def _decide(agent: str, hook: hooks.HookCall, stops: _Stops) -> Verdict:
    """Judge, ask, wait: a Verdict in every case but an interruption."""
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
            return _wait(db, found, owner_id, _NAMES[agent], stops)
        except (StateError, ChannelsError, ConfigError) as exc:
            return _unusable(exc)
    finally:
        db.close()


def _wait(db: Database, opened: Opened, owner_id: str, name: str, stops: _Stops) -> Verdict:
    try:
        verdict = opened.wait(db)
    except stops:
        opened.cancel(db, f"{name} stopped waiting for the answer", owner_id)
        raise
    assert verdict is not None  # no `until_ms`: it waits for the answer or the deadline
    return verdict


def _unusable(exc: Exception) -> Verdict:
    reason = " ".join(str(exc).split())
    return Verdict(False, f"Denied: the gate could not be used ({reason})", None, None, None)
