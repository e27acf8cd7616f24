"""`adapters.agents.hooks`: the PreToolUse input read, Claude Code's tools in the policy's
terms, and each agent's answer (pure functions)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from adapters.agents import approvals, hooks
from adapters.agents.approvals import Verdict
from channels.config import gate as gate_config
from channels.decisions import context
from channels.pi import gating
from tests.channels.telegram.helpers import config_dir


def hook(tool: str, **tool_input: Any) -> hooks.HookCall:
    return hooks.parse(json.dumps({"session_id": "s", "cwd": "/work/app",
                                   "hook_event_name": "PreToolUse", "tool_name": tool,
                                   "tool_input": tool_input}))


@pytest.mark.parametrize(("tool", "given", "policy_tool", "added"), [
    ("Bash", {"command": "ls", "description": "List"}, "bash", {}),
    ("Write", {"file_path": "/work/app/.env", "content": "A=1"}, "write",
     {"path": "/work/app/.env"}),
    ("Edit", {"file_path": "/work/app/a.py", "old_string": "x", "new_string": "y"}, "edit",
     {"path": "/work/app/a.py", "edits": [{"oldText": "x", "newText": "y"}]}),
    ("MultiEdit", {"file_path": "/work/app/a.py", "edits": [
        {"old_string": "a", "new_string": "b"}, {"old_string": "c", "new_string": "d"}]},
     "edit", {"path": "/work/app/a.py", "edits": [{"oldText": "a", "newText": "b"},
                                                   {"oldText": "c", "newText": "d"}]}),
    ("NotebookEdit", {"notebook_path": "/work/app/n.ipynb", "new_source": "print(1)"},
     "write", {"path": "/work/app/n.ipynb", "content": "print(1)"}),
    ("Read", {"file_path": "/etc/hosts"}, "read", {"path": "/etc/hosts"}),
    ("Grep", {"pattern": "TODO", "path": "/work/app"}, "grep", {}),
    ("Glob", {"pattern": "**/*.py"}, "find", {}),
    ("WebFetch", {"url": "https://example.com"}, "webfetch", {}),
])
def test_each_tool_is_judged_in_the_policys_terms_and_bound_as_given(
        tool: str, given: dict[str, Any], policy_tool: str, added: dict[str, Any]) -> None:
    subject, judged = hooks.calls(hook(tool, **given), hooks.CLAUDE_CODE, "laptop")
    assert (subject.tool, dict(subject.input)) == (tool, given)
    assert subject.subject["kind"] == "agent.tool_call" and subject.subject["host"] == "laptop"
    assert (judged.tool, dict(judged.input)) == (policy_tool, {**given, **added})


def test_a_write_of_an_env_file_is_asked_and_its_card_shows_the_content(
        home: Path) -> None:
    gate_config.write_gate_policy(config_dir(home), dataclasses.replace(
        gate_config.DEFAULT_POLICY, enabled=True))
    _, judged = hooks.calls(hooks.HookCall("s", str(home), "Write", {
        "file_path": str(home / ".env"), "content": "SECRET=1"}), hooks.CLAUDE_CODE, "h")
    found, _ = approvals.judge_call(judged, config_dir=config_dir(home), home=home)
    assert (found.action, found.rule) == ("ask", "path: .env*")
    card = gating.presentation(judged, found.rule, context.Context())
    assert card["summary"] == "Claude Code wants to write .env"
    assert {"kind": "preformatted", "text": "SECRET=1"} in card["blocks"]


def test_an_edit_card_shows_the_change_as_a_diff() -> None:
    _, judged = hooks.calls(hook("Edit", file_path="/work/app/a.py", old_string="x = 1",
                                 new_string="x = 2"), hooks.CLAUDE_CODE, "h")
    assert gating.shown_input(judged) == ("--- /work/app/a.py\n+++ /work/app/a.py\n"
                                          "@@ change 1 of 1 @@\n-x = 1\n+x = 2")


ALLOWED = Verdict(True, "Allowed on Telegram", gating.ALLOW, "decision-1", "bash: git push")
GRANTED = Verdict(True, "Allowed: this exact input was allowed for this session (decision x)",
                  gating.ALLOW_SESSION, "decision-0", "bash: git push")
POLICY = Verdict(True, "Allowed by the gate policy: no rule matches this call", None, None, None)
DENIED = Verdict(False, "Denied on Telegram: not now", gating.DENY_REASON, "decision-1", None)
BLOCKED = Verdict(False, "Blocked: the state database", None, None, "guard: state database")


def claude(decision: str, reason: str) -> hooks.Answer:
    return hooks.Answer(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": decision,
        "permissionDecisionReason": reason}}) + "\n", "", 0)


@pytest.mark.parametrize(("agent", "verdict", "expected"), [
    (hooks.CLAUDE_CODE, ALLOWED, claude("allow", "Allowed on Telegram")),
    (hooks.CLAUDE_CODE, GRANTED, claude("allow", GRANTED.message)),
    (hooks.CLAUDE_CODE, POLICY, hooks.Answer("", "", 0)),  # Claude Code's own rules decide
    (hooks.CLAUDE_CODE, DENIED, claude("deny", "Denied on Telegram: not now")),
    (hooks.CLAUDE_CODE, BLOCKED, claude("deny", "Blocked: the state database")),
    (hooks.CODEX, ALLOWED, hooks.Answer("", "", 0)),  # Codex cannot be told "allow"
    (hooks.CODEX, POLICY, hooks.Answer("", "", 0)),
    (hooks.CODEX, DENIED, hooks.Answer("", "Denied on Telegram: not now\n", 2)),
    (hooks.CODEX, BLOCKED, hooks.Answer("", "Blocked: the state database\n", 2)),
])
def test_each_verdict_is_answered_as_the_agents_contract_reads_it(
        agent: str, verdict: Verdict, expected: hooks.Answer) -> None:
    assert hooks.answer(agent, verdict) == expected


@pytest.mark.parametrize(("text", "error"), [
    ("{", "the hook input is not JSON"),
    ('{"hook_event_name": "PreToolUse", "session_id": "s", "cwd": "rel", "tool_name": "Bash",'
     ' "tool_input": {}}', "cwd must be an absolute path, not 'rel'"),
    ('{"hook_event_name": "PreToolUse", "session_id": " ", "cwd": "/", "tool_name": "Bash",'
     ' "tool_input": {}}', "session_id must be a non-empty string"),
])
def test_bad_input_says_what_is_wrong(text: str, error: str) -> None:
    with pytest.raises(hooks.BadInput, match=error):
        hooks.parse(text)


def permission_request(**fields: Any) -> str:
    return json.dumps({"session_id": "s", "turn_id": "t", "transcript_path": None, "cwd": "/w",
                       "model": "gpt", "permission_mode": "default",
                       "hook_event_name": "PermissionRequest", "tool_name": "Bash",
                       "tool_input": {"command": "git push", "description": "Push it"},
                       **fields})


def test_codex_permission_request_is_parsed_with_its_event() -> None:
    hook = hooks.parse(permission_request(), hooks.CODEX)
    assert (hook.event, hook.tool_name, dict(hook.tool_input)) == (
        hooks.PERMISSION_REQUEST, "Bash", {"command": "git push", "description": "Push it"})
    assert hooks.pre_tool_use_form(hook, hooks.CODEX, "laptop").input == {"command": "git push"}


def test_claude_codes_hook_does_not_take_a_permission_request() -> None:
    with pytest.raises(hooks.BadInput, match="'PermissionRequest'; this hook answers"
                                             " PreToolUse only"):
        hooks.parse(permission_request(), hooks.CLAUDE_CODE)


@pytest.mark.parametrize(("verdict", "decision"), [
    (ALLOWED, {"behavior": "allow"}),
    (POLICY, {"behavior": "allow"}),
    (DENIED, {"behavior": "deny", "message": "Denied on Telegram: not now"}),
    (BLOCKED, {"behavior": "deny", "message": "Blocked: the state database"}),
])
def test_a_permission_request_is_always_answered_explicitly(
        verdict: Verdict, decision: dict[str, Any]) -> None:
    done = hooks.answer(hooks.CODEX, verdict, hooks.PERMISSION_REQUEST)
    assert (done.stderr, done.exit_code) == ("", 0)
    assert json.loads(done.stdout) == {"hookSpecificOutput": {
        "hookEventName": "PermissionRequest", "decision": decision}}
