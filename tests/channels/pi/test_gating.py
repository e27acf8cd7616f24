"""A gated tool call as a decision: the card shows the whole input (split, never cut), the
subject binds the exact input, and "allowed for this session" is found by an indexed lookup."""

from __future__ import annotations

import re

import pytest

from channels.decisions import context, records, resolution, views, workflows
from channels.decisions.presentation import MAX_STRING_CODE_UNITS, normalize_presentation
from channels.decisions.resolution import HumanAnswer
from channels.pi import gating
from channels.pi.gating import GatedCall
from channels.text import utf16_len
from state.database import Database

SESSION = "0b6f7a52-9c1e-4c55-8f6e-2f4b1c9d7e10"
WHERE = context.Context("web-app", "deploy-review", "laptop")


def test_a_long_command_is_shown_whole_in_several_preformatted_blocks() -> None:
    command = "\n".join(f"echo line {i} 😀" for i in range(3000))  # 52,890 UTF-16 units
    document = gating.presentation(GatedCall("bash", {"command": command}, "/w/app"),
                                   "bash: rm -rf", WHERE)
    normalized = normalize_presentation(document)  # within every limit of the contract
    pre = [b["text"] for b in normalized["blocks"] if b["kind"] == "preformatted"]
    assert len(pre) == 4 and "".join(pre) == command
    assert all(utf16_len(text) <= MAX_STRING_CODE_UNITS for text in pre)
    fields = normalized["blocks"][-2]
    assert fields == {"kind": "fields", "items": [
        {"label": "Tool", "value": "bash"}, {"label": "Working directory", "value": "/w/app"},
        {"label": "Rule that matched", "value": "bash: rm -rf"}]}
    assert context.split_context(normalized["blocks"])[1] == WHERE
    assert normalized["summary"] == "Pi wants to run a command"


def test_chunks_never_split_a_surrogate_pair() -> None:
    text = "😀" * 10
    pieces = gating.chunks(text, limit=5)
    assert "".join(pieces) == text and all(utf16_len(p) <= 5 for p in pieces)


def test_an_input_too_long_for_the_parts_is_attached_whole_and_one_too_big_refused() -> None:
    content = "\n".join(f"row {i}" for i in range(12_000))  # 93,889 characters
    call = GatedCall("write", {"path": "big.txt", "content": content}, "/w")
    document = normalize_presentation(gating.presentation(call, None, WHERE))
    [pre] = [b["text"] for b in document["blocks"] if b["kind"] == "preformatted"]
    assert pre == "\n".join(f"row {i}" for i in range(gating.PREVIEW_LINES))  # the first lines
    assert {"label": "Attached", "value": f"content.txt: 12,000 lines, {len(content):,} bytes"
            " (UTF-8)"} in document["blocks"][-2]["items"]  # type: ignore[typeddict-item]
    assert call.attachment() == gating.Attachment("content.txt", content.encode())
    with pytest.raises(gating.TooLong, match="more than a decision attaches"):
        gating.presentation(GatedCall("write", {"path": "big.txt", "content": "x" * 500_001},
                                      "/w"), None, WHERE)


def test_an_edit_is_shown_as_a_diff_and_control_characters_visibly() -> None:
    edit = GatedCall("edit", {"path": ".env", "edits": [
        {"oldText": "KEY=old", "newText": "KEY=new\x1b[2J"}]}, "/w")
    assert gating.title(edit) == "Pi wants to edit .env"
    assert gating.shown_input(edit) == (
        "--- .env\n+++ .env\n@@ change 1 of 1 @@\n-KEY=old\n+KEY=new\\x1b[2J")


def test_what_the_model_is_told_names_no_person_for_a_timeout_or_a_cancel() -> None:
    told = gating.outcome_text
    assert told("accepted", "human", "allow", None, "on Telegram", None, 10) == \
        "Allowed on Telegram"
    assert told("accepted", "human", "deny_reason", "not now", "on Telegram", None, 10) == \
        "Denied on Telegram: not now"
    assert told("accepted", "timeout_policy", "deny", None, None, None, 10) == \
        "Denied: no answer within 10 minutes"
    assert told("cancelled", "explicit_cancel", None, None, None, "you pressed Escape", 10) == \
        "Cancelled: you pressed Escape"
    assert gating.where_answered("pi", True) == "in the terminal"
    assert gating.where_answered("telegram:ops", False) == "on Telegram"


def _gate(db: Database, call: GatedCall, session: str = SESSION) -> workflows.AskHandle:
    spec = workflows.AskSpec(
        title=gating.title(call), presentation=gating.presentation(call, None, WHERE),
        choices=gating.CHOICES, timeout_ms=600_000, default_choice=gating.DENY,
        origin_session_id=session, subject=call.subject, workflow=workflows.GATE_WORKFLOW,
        run_id=gating.run_id(session, call, db.entropy.token_bytes(8).hex()))
    return workflows.create_ask(db, spec, "bridge-1")


def _answer(db: Database, handle: workflows.AskHandle, choice: str) -> None:
    db.write(lambda c: resolution.resolve(c, HumanAnswer(
        handle.decision_id, handle.request.request_digest, {"choice": choice}, "pi", SESSION,
        f"e-{handle.decision_id}", f"e-{handle.decision_id}"), db.clock.now_ms()))


def test_allowed_for_the_session_is_found_for_exactly_that_input_and_session(
        db: Database) -> None:
    rm = GatedCall("bash", {"command": "rm -rf build"}, "/w/app")
    once = _gate(db, rm)
    _answer(db, once, gating.ALLOW)  # allowed once: not a grant
    granted = _gate(db, rm)
    _answer(db, granted, gating.ALLOW_SESSION)

    def grants(call: GatedCall, session: str = SESSION) -> list[str]:
        return db.read(lambda c: views.accepted_with_subject(
            c, gating.subject_prefix(session, call), call.subject_hash, gating.ALLOW_SESSION))

    assert grants(rm) == [granted.decision_id]
    assert grants(GatedCall("bash", {"command": "rm -rf build "}, "/w/app")) == []
    assert grants(GatedCall("bash", {"command": "rm -rf build"}, "/w/other")) == []
    assert grants(rm, "1b6f7a52-9c1e-4c55-8f6e-2f4b1c9d7e10") == []
    stored = db.read(lambda c: records.load(c, granted.decision_id))
    assert stored.request.document["subject"] == rm.subject
    listed = db.read(lambda c: views.accepted_subjects(
        c, gating.session_prefix(SESSION), gating.ALLOW_SESSION))
    assert listed == [(granted.decision_id, rm.subject)]
    # No deferred turn: the waiting call gets the answer.
    assert db.conn.execute("SELECT count(*) FROM turn_intents").get == 0


def test_the_grant_lookup_reads_through_indexes(db: Database) -> None:
    sql = ("SELECT d.decision_id, x.response_hash FROM runs r"
           " JOIN human_decisions d ON d.run_id = r.run_id"
           " JOIN human_decision_resolutions x ON x.decision_id = d.decision_id"
           " WHERE r.run_id >= :low AND r.run_id < :high AND d.subject_hash = :subject"
           " AND x.outcome = 'accepted' ORDER BY x.resolved_at, d.decision_id")
    plan = [str(row[3]) for row in db.conn.execute(
        f"EXPLAIN QUERY PLAN {sql}", {"low": "gate-", "high": "gate-\uffff", "subject": b""})]
    assert not [line for line in plan if re.match(r"SCAN (r|d|x)\b", line)], plan


def test_an_attached_input_that_starts_blank_still_shows_its_first_text() -> None:
    content = " \n" * 50 + "payload\n" * 10_000
    document = normalize_presentation(gating.presentation(
        GatedCall("write", {"path": "f.txt", "content": content}, "/w"), None, WHERE))
    [pre] = [b["text"] for b in document["blocks"] if b["kind"] == "preformatted"]
    assert pre.startswith("payload\npayload") and utf16_len(pre) <= gating.PREVIEW_UNITS


def test_another_agents_call_names_it_in_the_title_and_subject_and_never_matches_pis() -> None:
    command = {"command": "rm -rf build"}
    pi = GatedCall("bash", command, "/w/app")
    claude = GatedCall("bash", command, "/w/app", agent="claude-code", host="laptop")
    mcp = GatedCall("write", {"path": "a/notes.md", "content": "x"}, "/w", agent="mcp:cursor")
    assert pi.subject == {"kind": "pi.tool_call", "tool": "bash", "input": command,
                          "cwd": "/w/app"}
    assert claude.subject == {"kind": "agent.tool_call", "tool": "bash", "input": command,
                              "cwd": "/w/app", "agent": "claude-code", "host": "laptop"}
    assert claude.subject_hash != pi.subject_hash
    assert gating.title(claude) == "Claude Code wants to run a command"
    assert gating.title(mcp) == "cursor (MCP) wants to write notes.md"
    assert gating.title(GatedCall("bash", command, "/", agent="codex")) == \
        "Codex wants to run a command"
    assert gating.title(GatedCall("bash", command, "/", agent="mcp:")) == \
        "An MCP client wants to run a command"
