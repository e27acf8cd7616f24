"""The MCP tools: ask_human (a ticket at once), wait (the person's answer, or still pending)
and request_approval (the gate's judgement, waited on like the hook's).

Each tool's arguments are checked here; a wrong one is ToolError (an `isError` result with
one line, server/tools.mdx "Error Handling"). ask_human opens a `piw-channels.ask` decision
and lets go of its run at once, like `ask` without `--wait`: `poll` carries the card, settles
its deadline and finishes the run. wait only reads what the single resolution function
recorded, so every wait after the answer returns that same answer: a second press changes
nothing. request_approval goes through adapters.agents.approvals, the hook's own path. The
asker is `mcp:<client name>` and this host, as the inbox and the audit show it.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from adapters.agents import approvals, hooks
from adapters.agents.approvals import Opened, Verdict
from channels.config.loading import resolve_config_dir
from channels.decisions import context, records, workflows
from channels.decisions.choices import text_input
from channels.decisions.fields import name_error
from channels.reports import audit
from state.database import Database

__all__ = ["DEFINITIONS", "Session", "ToolError", "call"]


_MAX_WAIT_SECONDS: Final = 600  # one wait call; the client calls again for longer
_DEFAULT_WAIT_SECONDS: Final = 30
_MAX_DEADLINE_SECONDS: Final = 3650 * 86_400
_SLICE_MS: Final = 1000  # how often a waiting approval looks whether the client went away
_POLL_SECONDS: Final = 0.1


class ToolError(ValueError):
    """A tool call that cannot be done as asked: its one-line reason goes to the model."""


class _Stop(Protocol):
    """Whether the call should stop waiting (cancelled, or the client went away)."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Session:
    """One client connection: who asks (agent `mcp:<client>`), from where."""

    client: str
    session_id: str
    stop: _Stop  # set when the client cancels the call or closes stdin

    @property
    def agent(self) -> str:
        return f"mcp:{self.client}"


_CHOICE = {"type": "object", "properties": {"id": {"type": "string"},
                                             "label": {"type": "string"}},
           "required": ["id", "label"]}
DEFINITIONS: Final[list[dict[str, Any]]] = [
    {"name": "ask_human",
     "description": "Ask a person a question on Telegram. Returns at once with a ticket; call"
                    " `wait` with it to get the answer.",
     "inputSchema": {"type": "object", "required": ["title", "choices"], "properties": {
         "title": {"type": "string", "description": "the question, one line"},
         "choices": {"type": "array", "items": _CHOICE, "minItems": 1,
                     "description": "the buttons: [{id, label}]"},
         "text_choice": {"type": "object", "required": ["id", "label", "prompt"],
                         "properties": {"id": {"type": "string"},
                                        "label": {"type": "string"},
                                        "prompt": {"type": "string"}},
                         "description": "a button that asks the person for text"},
         "deadline_seconds": {"type": "integer", "minimum": 1,
                              "description": "no answer by then: default_choice, or expired"},
         "default_choice": {"type": "string", "description": "the choice id the deadline"
                                                             " applies (needs deadline)"}}}},
    {"name": "wait",
     "description": "Wait for the person's answer to an ask_human ticket, up to timeout"
                    " seconds (default 30, at most 600): the answer, or status pending.",
     "inputSchema": {"type": "object", "required": ["ticket"], "properties": {
         "ticket": {"type": "string"},
         "timeout": {"type": "number", "minimum": 0, "maximum": _MAX_WAIT_SECONDS}}}},
    {"name": "request_approval",
     "description": "Ask the gate whether a tool call may run: allowed or denied by the"
                    " gate policy at once, or a person is asked on Telegram (up to the"
                    " policy's timeout; no answer denies).",
     "inputSchema": {"type": "object", "required": ["tool", "input", "cwd"], "properties": {
         "tool": {"type": "string", "description": "the tool name, e.g. Bash"},
         "input": {"type": "object", "description": "the tool's exact input"},
         "cwd": {"type": "string", "description": "absolute working directory"}}}},
]


def call(name: str, args: Mapping[str, Any], session: Session) -> dict[str, Any]:
    """Run one tool; ToolError for a call that cannot be done (KeyError: no such tool)."""
    return {"ask_human": _ask_human, "wait": _wait,
            "request_approval": _request_approval}[name](args, session)


def _text(args: Mapping[str, Any], key: str, *, required: bool = True) -> str | None:
    value = args.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{key} must be a non-empty string")
    return value


def _choice_id(value: Any, where: str) -> str:
    if (rule := name_error(value)) is not None:
        raise ToolError(f"{where} id {value!r} is invalid: {rule}")
    return str(value)


def _choices(args: Mapping[str, Any]) -> dict[str, Any]:
    given = args.get("choices")
    if not isinstance(given, list) or not given:
        raise ToolError("choices must be a non-empty list of {id, label}")
    found: dict[str, Any] = {}
    extra = args.get("text_choice")
    if extra is not None and not isinstance(extra, dict):
        raise ToolError("text_choice must be an object {id, label, prompt}")
    for i, item in enumerate([*given, *([extra] if extra else [])]):
        if not isinstance(item, dict):
            raise ToolError(f"choices[{i}] must be an object {{id, label}}")
        cid = _choice_id(item.get("id"), "choice")
        if cid in found:
            raise ToolError(f"choice {cid!r} is given twice")
        label = _text(item, "label")
        found[cid] = {"label": label}
        if item is extra:
            found[cid]["input"] = text_input("text", str(_text(item, "prompt")))
    return found


def _ask_human(args: Mapping[str, Any], session: Session) -> dict[str, Any]:
    title = str(_text(args, "title"))
    choices = _choices(args)
    deadline = args.get("deadline_seconds")
    if deadline is not None and (not isinstance(deadline, int) or isinstance(deadline, bool)
                                 or not 1 <= deadline <= _MAX_DEADLINE_SECONDS):
        raise ToolError(f"deadline_seconds must be an integer from 1 to"
                        f" {_MAX_DEADLINE_SECONDS}")
    default = args.get("default_choice")
    if default is not None and (deadline is None or default not in choices):
        raise ToolError("default_choice needs deadline_seconds and must be one of the"
                        " choice ids")
    config_dir = resolve_config_dir()
    nobody = approvals.nobody_to_ask(config_dir, "operator")
    if nobody is not None:
        raise ToolError(f"nobody can be asked ({nobody})")
    where = context.automatic(Path.cwd(), session.session_id)
    spec = workflows.AskSpec(
        title=title, presentation=context.with_context(
            workflows.presentation_for(title, None, None), where),
        choices=choices, timeout_ms=None if deadline is None else deadline * 1000,
        default_choice=default,
        subject={"kind": "ask", "title": title, "agent": session.agent,
                 "host": socket.gethostname()})
    with Database.open_writer() as db:
        handle = workflows.create_ask(db, spec, workflows.new_owner_id(db, "mcp"))
        handle.release(db)  # poll finishes it: nobody holds it
    expires = handle.request.expires_at_ms
    return {"ticket": handle.decision_id, "status": "pending",
            "deadline_at_ms": expires}


def _wait(args: Mapping[str, Any], session: Session) -> dict[str, Any]:
    ticket = str(_text(args, "ticket"))
    timeout = args.get("timeout", _DEFAULT_WAIT_SECONDS)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) \
            or not 0 <= timeout <= _MAX_WAIT_SECONDS:
        raise ToolError(f"timeout must be a number of seconds from 0 to {_MAX_WAIT_SECONDS}")
    end = time.monotonic() + float(timeout)
    with Database.open_reader() as db:
        try:
            asked_by = db.read(lambda c: records.load(c, ticket).asker())
        except KeyError:
            asked_by = None
        if asked_by is None or not asked_by.agent.startswith("mcp:"):
            raise ToolError(f"unknown ticket {ticket!r}: give a ticket ask_human returned")
        seen = -1
        while True:
            version = int(db.conn.execute("PRAGMA data_version").get)
            if version != seen:  # another writer committed: look (else no read at all)
                seen = version
                resolved = db.read(lambda c: records.resolution_of(c, ticket))
                if resolved is not None:
                    return _answer(db.read(lambda c: audit.row(c, ticket)), resolved)
            if time.monotonic() >= end or session.stop.is_set():
                return {"ticket": ticket, "status": "pending"}
            time.sleep(_POLL_SECONDS)


# How a settled ticket ended, by the resolution's provenance (channels.reports.audit's words).
_STATUS: Final = {"human": "answered", "timeout": "defaulted", "expired": "expired",
                  "cancel": "cancelled"}


def _answer(row: audit.AuditRow, resolved: records.Resolution) -> dict[str, Any]:
    """The answer as the resolution recorded it; the person by the name Telegram showed and
    the channel, never their numeric id."""
    entered = (resolved.response or {}).get("input")
    text = entered.get("text") if isinstance(entered, dict) else None
    return {"ticket": row.decision_id,
            "status": _STATUS.get(row.provenance or "", row.outcome),
            "choice": row.choice, "label": row.choice_label, "text": text,
            "by": row.provenance, "who": row.who_name, "channel": row.channel,
            "answered_at_ms": row.resolved_at, "reason": row.reason}


def _request_approval(args: Mapping[str, Any], session: Session) -> dict[str, Any]:
    tool, cwd = str(_text(args, "tool")), str(_text(args, "cwd"))
    given = args.get("input")
    if not isinstance(given, dict):
        raise ToolError("input must be a JSON object (the tool's exact input)")
    if not cwd.startswith("/"):
        raise ToolError(f"cwd must be an absolute path, not {cwd!r}")
    subject, judged = hooks.calls(hooks.HookCall(session.session_id, cwd, tool, given),
                                  session.agent, socket.gethostname())
    with Database.open_writer() as db:
        owner_id = workflows.new_owner_id(db, "mcp")
        found = approvals.open_call(db, subject, session_id=session.session_id,
                                    owner_id=owner_id, config_dir=resolve_config_dir(),
                                    judged=judged)
        verdict = found if isinstance(found, Verdict) else _held(db, found, owner_id, session)
    return {"decision": "allow" if verdict.allow else "deny", "reason": verdict.message,
            "choice": verdict.choice, "decision_id": verdict.decision_id}


def _held(db: Database, opened: Opened, owner_id: str, session: Session) -> Verdict:
    """Wait in slices, so that a client that goes away cancels its decision (its card
    settles) instead of leaving it to the deadline."""
    while True:
        verdict = opened.wait(db, until_ms=db.clock.now_ms() + _SLICE_MS)
        if verdict is not None:
            return verdict
        if session.stop.is_set():
            return opened.cancel(db, "the MCP client stopped waiting",
                                         owner_id)
