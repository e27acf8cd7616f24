"""A gated Pi tool call as a decision: its subject, its card, its choices, what the model hears.

The subject is the call's exact input with the tool name and the working directory, so the
request digest binds an answer to exactly that input. The card shows the whole input (the
command, the edit as a diff, the written content) in preformatted blocks, never cut short; an
input too long for the card's parts is attached whole as a file (`attachment`: the card shows
its first lines and says what is attached), and one over `MAX_ATTACHED_BYTES` is refused
before anyone is asked. Runs are named
`gate-<session hash>-<subject hash>-<random>`, so "allowed for this session" is found again by
a range of the runs' primary key (no new table, no new index). Pure functions.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from channels.decisions import context
from channels.decisions.choices import text_input
from channels.decisions.presentation import (
    MAX_CODE_UNITS,
    MAX_STRING_CODE_UNITS,
    SCHEMA,
    Block,
    FieldItem,
    FieldsBlock,
)
from channels.text import utf16_len
from state.canonical import canonical_bytes, sha256

__all__ = [
    "ALLOW", "ALLOWING", "ALLOW_SESSION", "CHOICES", "DENY", "DENY_REASON",
    "MAX_ATTACHED_BYTES", "PREVIEW_LINES", "PREVIEW_UNITS", "REASON_INPUT", "Attachment",
    "GatedCall", "TooLong", "chunks", "outcome_text", "presentation",
    "preview_of", "run_id", "session_prefix", "shown_input", "subject_prefix", "title",
    "where_answered",
]


ALLOW, ALLOW_SESSION, DENY, DENY_REASON = "allow", "allow_session", "deny", "deny_reason"
REASON_INPUT = "reason"
CHOICES: dict[str, Any] = {
    ALLOW: {"label": "Allow once"},
    DENY: {"label": "Deny"},
    DENY_REASON: {"label": "Deny with a reason",
                  "input": text_input(REASON_INPUT, "Why not? (Pi is told)", 1, 500)},
    ALLOW_SESSION: {"label": "Allow this exact command for this session"},
}
ALLOWING = (ALLOW, ALLOW_SESSION)
# Room kept for the summary, the fields and the context block within the 64,000 total.
_INPUT_BUDGET = MAX_CODE_UNITS - 2_000
# An attached input's upper bound: Pi's bridge carries a tool call on one line of at most
# 1 MiB (adapters/pi/framing.py), with JSON escapes; Telegram takes 50 MB, a phone reads less.
MAX_ATTACHED_BYTES = 500_000
PREVIEW_LINES, PREVIEW_UNITS = 40, 3_000  # what the card shows of an attached input
_UNSHOWABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


_PI_AGENT = "pi"
_AGENT_NAMES = {_PI_AGENT: "Pi", "claude-code": "Claude Code", "codex": "Codex"}


class TooLong(Exception):
    """The input is too long even for an attached file."""


@dataclass(frozen=True, slots=True)
class Attachment:
    """A gated call's whole input as a file: `data` is the input itself, UTF-8."""

    name: str
    data: bytes

    @property
    def lines(self) -> int:
        return self.data.count(b"\n") + (0 if self.data.endswith(b"\n") else 1)

    def describe(self) -> str:
        """`input.txt: 4,012 lines, 112,345 bytes (UTF-8)`: what a card says is attached."""
        return f"{self.name}: {self.lines:,} lines, {len(self.data):,} bytes (UTF-8)"


@dataclass(frozen=True, slots=True)
class GatedCall:
    """One tool call the policy wants a person to see, and which agent makes it.

    `agent` is `pi`, `claude-code`, `codex` or `mcp:<client>` (channels.decisions.askers);
    another agent's subject names it and its host, so the inbox and the audit say who asked
    and an answer given to one agent's call never matches another's. A Pi call's subject is
    unchanged from before agents were named: grants stored then still match.
    """

    tool: str
    input: Mapping[str, Any]
    cwd: str
    agent: str = _PI_AGENT
    host: str | None = None

    @property
    def subject(self) -> dict[str, Any]:
        subject = {"kind": "pi.tool_call", "tool": self.tool, "input": dict(self.input),
                   "cwd": self.cwd}
        if self.agent != _PI_AGENT:
            subject["kind"] = "agent.tool_call"
            subject["agent"] = self.agent
            if self.host is not None:
                subject["host"] = self.host
        return subject

    @property
    def subject_hash(self) -> bytes:
        """The blob hash `human_decisions.subject_hash` stores for this subject."""
        return sha256(canonical_bytes(self.subject))

    def attachment(self) -> Attachment | None:
        """The file a card attaches: the input exactly as it will run (control characters
        kept; a lone surrogate, which UTF-8 cannot hold, written as `\\udXXX`), when it is
        too long for the card's parts; None when the parts show it whole."""
        if utf16_len(shown_input(self)) <= _INPUT_BUDGET:
            return None
        name = {"bash": "input.txt", "edit": "edit.diff", "write": "content.txt"}.get(
            self.tool, "input.json")
        return Attachment(name, _whole_input(self).encode("utf-8", "backslashreplace"))


def session_prefix(session_id: str) -> str:
    return "gate-" + hashlib.sha256(session_id.encode()).hexdigest()[:12] + "-"


def subject_prefix(session_id: str, call: GatedCall) -> str:
    return session_prefix(session_id) + call.subject_hash.hex()[:24] + "-"


def run_id(session_id: str, call: GatedCall, entropy_hex: str) -> str:
    return subject_prefix(session_id, call) + entropy_hex


def _agent_name(agent: str) -> str:
    """How a card names an agent: `Pi`, `Claude Code`, `Codex`, `<client> (MCP)`."""
    if agent.startswith("mcp:"):
        client = context.clean(agent[4:])
        return f"{client} (MCP)" if client else "An MCP client"
    return _AGENT_NAMES.get(agent) or context.clean(agent) or "An agent"


def title(call: GatedCall) -> str:
    """One line: what the agent wants to do."""
    who = _agent_name(call.agent)
    path = call.input.get("path")
    if call.tool == "bash":
        return f"{who} wants to run a command"
    if call.tool in ("edit", "write") and isinstance(path, str):
        name = path.rsplit("/", 1)[-1] or path
        verb = "edit" if call.tool == "edit" else "write"
        return context.clean(f"{who} wants to {verb} {name}") or f"{who} wants to {verb} a file"
    return (context.clean(f"{who} wants to use its {call.tool} tool")
            or f"{who} wants to use a tool")


def shown_input(call: GatedCall) -> str:
    """The whole input as a person reads it (control characters written as \\xNN)."""
    text = _UNSHOWABLE.sub(lambda m: f"\\x{ord(m.group()):02x}", _whole_input(call))
    return text if text.strip() else repr(text)


def _whole_input(call: GatedCall) -> str:
    data = call.input
    if call.tool == "bash" and isinstance(data.get("command"), str):
        text = str(data["command"])
    elif call.tool == "write" and isinstance(data.get("content"), str):
        text = str(data["content"]) or "(an empty file)"
    elif call.tool == "edit" and isinstance(data.get("edits"), list):
        text = _diff(str(data.get("path", "")), data["edits"])
    else:
        text = json.dumps(dict(data), ensure_ascii=False, indent=2, sort_keys=True)
    return text


def _diff(path: str, edits: list[Any]) -> str:
    lines = [f"--- {path}", f"+++ {path}"]
    for at, edit in enumerate(edits, start=1):
        edit = edit if isinstance(edit, dict) else {}
        lines.append(f"@@ change {at} of {len(edits)} @@")
        lines.extend("-" + line for line in str(edit.get("oldText", "")).split("\n"))
        lines.extend("+" + line for line in str(edit.get("newText", "")).split("\n"))
    return "\n".join(lines)


def chunks(text: str, limit: int = MAX_STRING_CODE_UNITS) -> list[str]:
    """`text` in pieces of at most `limit` UTF-16 code units, cut after a line where one
    fits, never inside a surrogate pair; joined they are `text` again."""
    pieces: list[str] = []
    while utf16_len(text) > limit:
        cut = _fit(text, limit)
        newline = text.rfind("\n", 0, cut)
        if newline > cut // 2:
            cut = newline + 1
        pieces.append(text[:cut])
        text = text[cut:]
    return [*pieces, text] if text else pieces


def _fit(text: str, limit: int) -> int:
    """The most characters of `text` whose UTF-16 length is at most `limit`."""
    units = 0
    for at, char in enumerate(text):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit:
            return at
    return len(text)


def presentation(call: GatedCall, rule: str | None, where: context.Context) -> dict[str, Any]:
    """Summary, the input in preformatted blocks (or its first lines and what is attached),
    the fields, and the context last."""
    shown = shown_input(call)
    attached = call.attachment()
    if attached is not None and len(attached.data) > MAX_ATTACHED_BYTES:
        raise TooLong(f"its input is {len(attached.data):,} bytes long, more than a decision"
                      f" attaches ({MAX_ATTACHED_BYTES:,})")
    blocks: list[Block] = [{"kind": "preformatted", "text": piece}
                           for piece in (chunks(shown) if attached is None else [])]
    items: list[FieldItem] = [
        {"label": "Tool", "value": call.tool},
        {"label": "Working directory", "value": context.clean(call.cwd) or "?"},
        {"label": "Rule that matched", "value": context.clean(rule or "") or "the policy"}]
    if attached is not None:
        preview = preview_of(shown)  # the attachment goes with every Telegram delivery
        blocks = [{"kind": "preformatted", "text": preview}, {"kind": "paragraph", "text": (
            "Above: the beginning of the input. The whole input, exactly what will run, comes"
            f" with this card on Telegram as the file {attached.name}.")}]
        items.append({"label": "Attached", "value": attached.describe()})
    fields: FieldsBlock = {"kind": "fields", "items": items}
    blocks.append(fields)
    line = title(call)
    document = {"schema": SCHEMA, "summary": line, "blocks": blocks}
    return context.with_context(document, where)


def preview_of(shown: str) -> str:
    """The first lines of a long input: at most PREVIEW_LINES, PREVIEW_UNITS units."""
    head = "\n".join(shown.split("\n", PREVIEW_LINES)[:PREVIEW_LINES])
    preview = chunks(head, PREVIEW_UNITS)[0].rstrip("\n")
    # A block must not be blank: input that starts with blank lines shows its first text.
    return preview if preview.strip() else chunks(shown.strip(), PREVIEW_UNITS)[0]


def outcome_text(outcome: str, provenance: str, choice: str | None, text: str | None,
                 where: str | None, reason: str | None, timeout_minutes: float) -> str:
    """What the model is told: who decided and how (no person's id; nobody is said to have
    decided when a timeout or a cancel did)."""
    if provenance == "timeout_policy":
        return f"Denied: no answer within {_minutes(timeout_minutes)}"
    if outcome == "cancelled":
        return f"Cancelled: {reason or 'cancelled'}"
    on = f" {where}" if where else ""
    if choice == ALLOW:
        return f"Allowed{on}"
    if choice == ALLOW_SESSION:
        return f"Allowed{on} for this session (this exact input)"
    if choice == DENY_REASON and text:
        return f"Denied{on}: {text}"
    return f"Denied{on}"


def where_answered(channel: str | None, terminal: bool) -> str | None:
    """`on Telegram`, `in Pi`, `in the terminal` (the terminal's actor is `local:<uid>`)."""
    if channel is None:
        return None
    if channel == "pi":
        return "in the terminal" if terminal else "in Pi"
    if channel.startswith("telegram"):
        return "on Telegram"
    return f"on {channel}"


def _minutes(value: float) -> str:
    if value >= 1 and float(value).is_integer():
        return f"{int(value)} minute{'s' if value != 1 else ''}"
    seconds = round(value * 60)
    return f"{seconds} second{'s' if seconds != 1 else ''}"
