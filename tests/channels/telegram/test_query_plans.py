"""Every query the poll path runs is checked with EXPLAIN QUERY PLAN: none may scan a table
whose size grows with history (a pass must cost the same with 100 or 10,000 settled
decisions). The statements are the ones a real poll cycle ran, traced with their bindings:
delivery, presses (on their message, on a message whose decision is another, a text choice),
a reply to the prompt, a reply to an unknown bot message, settlement, run finishing and idle.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import apsw
import pytest

from adapters.telegram.fake import FakeBotApi
from channels.telegram import pacing
from state.database import Database
from tests.channels.telegram.helpers import (
    TOKEN,
    configure_telegram_profile,
    open_decision,
    poll_in_process,
    press_button,
    prompt_message,
    reply_to_prompt,
)
from tests.unpaced import unpaced_pacer

# Tables that grow with every decision, press, message or event.
GROWING = {"effects", "effect_attempts", "human_decisions", "human_decision_resolutions",
           "human_decision_submissions", "events", "channel_inbox", "channel_messages",
           "channel_message_parts", "node_attempts", "runs", "resources", "blobs", "leases"}
_NAMES = re.compile(r"\b(?:FROM|JOIN)\s+(\w+)(?:\s+(?:AS\s+)?(\w+))?", re.IGNORECASE)
_NOT_ALIAS = {"where", "on", "using", "indexed", "left", "cross", "inner", "join", "order",
              "group", "limit", "natural", "set", "values", "not"}


def _aliases(sql: str) -> dict[str, str]:
    names: dict[str, str] = {}
    for table, alias in _NAMES.findall(sql):
        names[table] = table
        if alias and alias.lower() not in _NOT_ALIAS:
            names[alias] = table
    return names


def _full_scans(conn: apsw.Connection, sql: str, bindings: Any, partial: set[str]) -> list[str]:
    """The plan lines that read a growing table whole (a partial index's scan reads only the
    rows its condition keeps: not a full scan)."""
    names = _aliases(sql)
    found = []
    for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", bindings):
        detail = str(row[3])
        m = re.match(r"SCAN (\w+)", detail)
        if m is None or names.get(m.group(1)) not in GROWING:
            continue
        index = re.search(r"USING (?:COVERING )?INDEX (\w+)", detail)
        if index is None or index.group(1) not in partial:
            found.append(f"{detail}  <-  {sql}")
    return found


def test_no_query_on_the_poll_path_scans_a_growing_table(home: Path) -> None:
    traced: dict[str, Any] = {}

    def trace(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        if re.match(r"\s*(SELECT|UPDATE|DELETE|INSERT|WITH)\b", sql, re.IGNORECASE):
            traced.setdefault(sql, bindings)
        return True

    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            first, second, third = (open_decision(db, title=f"Plan {i}?") for i in range(3))
            poll_in_process(db)  # settled history first: its plans are those of a long one
            press_button(fake, first, "continue", 1)
            poll_in_process(db)
            poll_in_process(db)
            refs = {d: int(r) for d, r in db.conn.execute(
                "SELECT m.decision_id, p.external_message_ref FROM channel_message_parts p"
                " JOIN channel_messages m USING (message_id) WHERE m.purpose = 'delivery'")}
            db.conn.exec_trace = trace
            poll_in_process(db)  # idle
            press_button(fake, second, "stop", refs[second.decision_id])
            press_button(fake, third, "replan", refs[first.decision_id])  # another's message
            press_button(fake, third, "replan", refs[third.decision_id])
            poll_in_process(db)  # resolve, prompt, answer, settle, finish the run
            prompt = prompt_message(third.decision_id)
            assert prompt is not None
            reply_to_prompt(fake, prompt[0], prompt[1], "Do modules 1-10 first.")
            reply_to_prompt(fake, 999, "some other bot message", "hello")
            poll_in_process(db)
            poll_in_process(db)  # settle what the replies resolved
            db.conn.exec_trace = None
            resolved = db.conn.execute(
                "SELECT count(*) FROM human_decision_resolutions").get
            assert resolved == 3  # the traced passes did the work they were meant to
            partial = {str(n) for (n,) in db.conn.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'index' AND sql LIKE '% WHERE %'")}
            assert {"effects_unsettled", "node_attempts_one_active_per_run"} <= partial
            scans = [line for sql, bindings in traced.items()
                     for line in _full_scans(db.conn, sql, bindings, partial)]
    assert len(traced) > 40  # the trace saw the whole cycle
    assert scans == []


def _cycle_steps(db: Database, fake: FakeBotApi, count: int) -> dict[str, tuple[int, int]]:
    """Open `count` decisions, deliver them, press each and settle: {statement: (executions,
    VM steps)} of the traced passes. VM steps count rows visited, so a query that reads more
    rows as the history grows shows it even where its plan is an indexed search."""
    steps: dict[str, list[int]] = {}

    def profile(event: dict[str, Any]) -> None:
        entry = steps.setdefault(str(event["sql"]), [0, 0])
        entry[0] += 1
        entry[1] += int(event["stmt_status"]["SQLITE_STMTSTATUS_VM_STEP"])

    handles = [open_decision(db, title=f"Step {i}?") for i in range(count)]
    db.conn.trace_v2(apsw.SQLITE_TRACE_PROFILE, profile)
    poll_in_process(db)
    db.conn.trace_v2(0, None)
    for handle in handles:
        [(ref,)] = db.conn.execute(
            "SELECT p.external_message_ref FROM channel_message_parts p JOIN channel_messages m"
            " USING (message_id) WHERE m.decision_id = ? AND m.purpose = 'delivery'",
            (handle.decision_id,))
        press_button(fake, handle, "continue", int(ref))
    db.conn.trace_v2(apsw.SQLITE_TRACE_PROFILE, profile)
    poll_in_process(db)
    poll_in_process(db)
    db.conn.trace_v2(0, None)
    return {sql: (n, vm) for sql, (n, vm) in steps.items()}


def test_no_statement_reads_more_rows_with_a_longer_history(
    home: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Dozens of deliveries to one chat in one pass: Telegram's 1 message a second would leave
    # most for later passes; this test is about the statements, not the pacing.
    monkeypatch.setattr(pacing, "new_pacer", unpaced_pacer)
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            short = _cycle_steps(db, fake, 3)
            _cycle_steps(db, fake, 40)  # history: 43 settled decisions
            long = _cycle_steps(db, fake, 3)
            settled = db.conn.execute(
                "SELECT count(*) FROM human_decision_resolutions").get
    assert settled == 46  # every cycle did its work
    assert len(short) > 40
    grown = [f"{short[sql][1] / short[sql][0]:.0f} -> {vm / n:.0f} steps: {sql}"
             for sql, (n, vm) in long.items()
             if sql in short and vm / n > 1.25 * short[sql][1] / short[sql][0] + 20]
    assert not grown, "\n".join(grown)
