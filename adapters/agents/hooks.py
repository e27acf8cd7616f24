"""The PreToolUse hook contracts of Claude Code and Codex, and Codex's PermissionRequest: the
JSON a hook reads on stdin, the call it names in the gate's terms, and the answer each agent
reads back. Pure functions.

Claude Code (https://code.claude.com/docs/en/hooks, "PreToolUse" and "Exit code output"):
stdin carries `session_id`, `transcript_path`, `cwd`, `permission_mode`, `hook_event_name`
("PreToolUse"), `tool_name`, `tool_input` and `tool_use_id`. Exit 0 with
`{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow" |
"deny" | "ask", "permissionDecisionReason": ...}}` on stdout decides (`allow` skips Claude
Code's own permission prompt; a `deny` reason is shown to Claude); exit 0 with no output
leaves the call to Claude Code's own permission rules; exit 2 is a blocking error (stdout is
ignored, stderr goes to Claude, the call is not run); any other exit code is a non-blocking
error and the call goes on. So every failure of ours exits 2, never 1.

Codex (https://developers.openai.com/codex/hooks, "PreToolUse"; openai/codex#17563,
#20702, #28437): the same stdin fields (and `turn_id`), for Bash (and, from 0.124,
apply_patch and MCP tools). Its PreToolUse can only refuse: `deny` (or exit 2, stderr the
reason) blocks the call; `permissionDecision: "allow"` is rejected as unsupported and the call
runs anyway, as it does when a hook fails. A person's "allow" is therefore silence (exit 0, no
output): the call goes on to Codex's own approval policy. A refusal is exit 2 with the reason
on stderr.

Codex's PermissionRequest (openai/codex#17563; codex-rs/hooks/schema/generated/
permission-request.command.{input,output}.schema.json): it runs where Codex would show its own
approval prompt, with the same stdin fields (`hook_event_name` "PermissionRequest", `tool_name`
"Bash", `tool_input` `{"command", "description"?}`). Exit 0 with `{"hookSpecificOutput":
{"hookEventName": "PermissionRequest", "decision": {"behavior": "allow" | "deny", "message":
...}}}` answers the prompt; a quiet or invalid hook leaves it to Codex's own prompt. Here
every answer is explicit: a person's allow is `allow`, anything else is `deny` with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from adapters.agents.approvals import Verdict
from channels.pi.gating import GatedCall

__all__ = [
    "BLOCKING", "CLAUDE_CODE", "CODEX", "MAX_INPUT_BYTES", "PERMISSION_REQUEST",
    "Answer", "BadInput", "HookCall", "answer", "calls", "parse", "pre_tool_use_form",
]


CLAUDE_CODE: Final = "claude-code"
CODEX: Final = "codex"
_PRE_TOOL_USE: Final = "PreToolUse"
PERMISSION_REQUEST: Final = "PermissionRequest"  # Codex only: its own approval prompt
MAX_INPUT_BYTES: Final = 8 * 1024 * 1024  # far above any tool call; a bound on what we read
BLOCKING: Final = 2  # both agents: a blocking error, the call is not run


class BadInput(ValueError):
    """The hook's stdin is not the hook JSON the agent documents."""


@dataclass(frozen=True, slots=True)
class HookCall:
    """The fields of one hook input that the gate uses."""

    session_id: str
    cwd: str
    tool_name: str
    tool_input: Mapping[str, Any]
    event: str = _PRE_TOOL_USE


@dataclass(frozen=True, slots=True)
class Answer:
    """What the hook prints and how it exits."""

    stdout: str
    stderr: str
    exit_code: int


def parse(text: str, agent: str = CLAUDE_CODE) -> HookCall:
    """The hook input, or BadInput saying what is wrong (one line)."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"the hook input is not JSON ({exc.__class__.__name__}: {exc})") from exc
    if not isinstance(document, dict):
        raise BadInput("the hook input must be a JSON object")
    event = document.get("hook_event_name")
    events = (_PRE_TOOL_USE, PERMISSION_REQUEST) if agent == CODEX else (_PRE_TOOL_USE,)
    if event not in events:
        raise BadInput(f"hook_event_name is {event!r}; this hook answers"
                       f" {' and '.join(events)} only")
    fields = {name: document.get(name) for name in ("session_id", "cwd", "tool_name")}
    for name, value in fields.items():
        if not isinstance(value, str) or not value.strip():
            raise BadInput(f"{name} must be a non-empty string")
    tool_input = document.get("tool_input")
    if not isinstance(tool_input, dict):
        raise BadInput("tool_input must be a JSON object")
    cwd = str(fields["cwd"])
    if not cwd.startswith("/"):
        raise BadInput(f"cwd must be an absolute path, not {cwd!r}")
    return HookCall(str(fields["session_id"]), cwd, str(fields["tool_name"]), tool_input,
                    str(event))


def calls(hook: HookCall, agent: str, host: str) -> tuple[GatedCall, GatedCall]:
    """(subject, judged): the call exactly as the agent will run it (its own tool name and
    input: what the decision binds), and the same call in the policy's terms (what the policy
    judges and the card shows)."""
    subject = GatedCall(hook.tool_name, dict(hook.tool_input), hook.cwd, agent=agent, host=host)
    tool, tool_input = _policy_terms(hook.tool_name, hook.tool_input)
    return subject, GatedCall(tool, tool_input, hook.cwd, agent=agent, host=host)


def pre_tool_use_form(hook: HookCall, agent: str, host: str) -> GatedCall:
    """A PermissionRequest's call as Codex's PreToolUse hook saw it just before (its input is
    the command alone), so that a person's allow of it there answers this prompt too."""
    return GatedCall(hook.tool_name, {"command": hook.tool_input.get("command")}, hook.cwd,
                     agent=agent, host=host)


def _policy_terms(name: str, given: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """An agent's tool and input as the policy names them (the input's own fields kept)."""
    data = dict(given)
    path = data.get("file_path", data.get("notebook_path"))
    named = {**data, "path": path} if isinstance(path, str) else data
    if name == "Bash":
        return "bash", data
    if name == "Write":
        return "write", named
    if name == "Edit":
        edit = {"oldText": data.get("old_string", ""), "newText": data.get("new_string", "")}
        return "edit", {**named, "edits": [edit]}
    if name == "MultiEdit":
        edits = data.get("edits")
        return "edit", {**named, "edits": [
            {"oldText": e.get("old_string", ""), "newText": e.get("new_string", "")}
            if isinstance(e, dict) else {} for e in (edits if isinstance(edits, list) else [])]}
    if name == "NotebookEdit":
        return "write", {**named, "content": data.get("new_source", "")}
    if name == "Read":
        return "read", named
    if name == "Grep":
        return "grep", data
    if name == "Glob":
        return "find", data
    return name.lower(), data


def answer(agent: str, verdict: Verdict, event: str = _PRE_TOOL_USE) -> Answer:
    """The verdict as the agent's hook contract reads it (see the module docstring)."""
    decided_by_person = verdict.decision_id is not None or verdict.choice is not None
    if event == PERMISSION_REQUEST:
        decision: dict[str, Any] = {"behavior": "allow" if verdict.allow else "deny"}
        if not verdict.allow:
            decision["message"] = verdict.message
        output = {"hookSpecificOutput": {"hookEventName": PERMISSION_REQUEST,
                                         "decision": decision}}
        return Answer(json.dumps(output, ensure_ascii=False) + "\n", "", 0)
    if agent == CODEX:
        if verdict.allow:
            return Answer("", "", 0)
        return Answer("", verdict.message + "\n", BLOCKING)
    if verdict.allow and not decided_by_person:
        return Answer("", "", 0)  # not the gate's to allow: Claude Code's own rules decide
    output = {"hookSpecificOutput": {
        "hookEventName": _PRE_TOOL_USE, "permissionDecision": "allow" if verdict.allow else "deny",
        "permissionDecisionReason": verdict.message}}
    return Answer(json.dumps(output, ensure_ascii=False) + "\n", "", 0)
