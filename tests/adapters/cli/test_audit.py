"""Issue 28, item 4: one inbox. `piw-channels audit --since` lists every approval (who asked:
agent and host; who answered, when, how, through which channel; the request digest), and
`decisions` and `/pending` name the agent and host. Real databases in a temporary HOME, the
real poll cycle against the loopback fake Bot API, the real command line.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from adapters.cli.audit import parse_since, render_audit
from adapters.cli.errors import UsageError
from adapters.telegram.fake import FakeBotApi
from channels.decisions import askers, workflows
from channels.decisions.context import Context, with_context
from channels.pi.answers import AnswerEvent, answer_locally
from channels.reports import audit as approvals
from state.database import Database
from state.exit_codes import ExitCode
from tests.channels.telegram.helpers import (
    CHOICES,
    TOKEN,
    USER,
    configure_telegram_profile,
    open_decision_now,
    press_button,
)
from tests.channels.telegram.test_answers_in_chat import push_command
from tests.channels.telegram.test_channel import CHAT, Flow, _configure
from tests.channels.telegram.test_channel import TOKEN as FLOW_TOKEN
from tests.cli import piw
from tests.shifted_clock import ShiftedClock

NOW = 1_796_601_600_000  # 2026-12-07T00:00:00Z


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return piw(home, *args)


# -- --since -------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-12-06", "2026-12-06T00:00:00+00:00"),
    ("2026-12-06T14:30", "2026-12-06T14:30:00+00:00"),
    ("2026-12-06 14:30:15", "2026-12-06T14:30:15+00:00"),
    ("2026-12-06T14:30Z", "2026-12-06T14:30:00+00:00"),
    ("2026-12-06T14:30:00.250Z", "2026-12-06T14:30:00.250000+00:00"),
    ("2026-12-06T16:30+02:00", "2026-12-06T14:30:00+00:00"),
])
def test_since_takes_iso_dates_and_times_utc_unless_they_say_otherwise(
    text: str, expected: str,
) -> None:
    ms = parse_since(text, NOW)
    assert datetime.fromtimestamp(ms / 1000, UTC).isoformat() == expected


@pytest.mark.parametrize(("text", "back_ms"), [
    ("90s", 90_000), ("30m", 1_800_000), ("2h", 7_200_000), ("3d", 259_200_000),
    ("2w", 1_209_600_000), (" 2h ", 7_200_000), ("0s", 0),
])
def test_since_takes_a_span_back_from_now(text: str, back_ms: int) -> None:
    assert parse_since(text, NOW) == NOW - back_ms


@pytest.mark.parametrize("text", [
    "", "yesterday", "2h ago", "-2h", "2x", "2.5h", "12/06/2026", "2026-13-01", "2026-12-06T25:00",
    "2026", "1h30m", "14:30",
])
def test_since_refuses_anything_else_with_the_forms_it_takes(text: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_since(text, NOW)
    assert str(refused.value).startswith(f"--since {text!r}: give an ISO date or time")
    assert "2h, 3d" in str(refused.value) and "\n" not in str(refused.value)


def test_a_bad_since_is_one_line_and_exit_2_with_or_without_a_database(home: Path) -> None:
    missing = run(home, "audit", "--since", "yesterday")
    assert (missing.returncode, missing.stdout) == (ExitCode.USAGE, "")
    assert missing.stderr.startswith("Error: --since 'yesterday': give an ISO date or time")
    assert missing.stderr.count("\n") == 1
    assert run(home, "init").returncode == 0
    again = run(home, "audit", "--since", "3 days", "--json")
    assert (again.returncode, again.stdout, again.stderr.count("\n")) == (ExitCode.USAGE, "", 1)


def test_audit_without_a_database_is_empty(home: Path) -> None:
    done = run(home, "audit", "--json")
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")


# -- who asked ---------------------------------------------------------------------------


def test_the_asker_is_read_from_the_subject_else_defensively() -> None:
    named = {"kind": "pi.tool_call", "agent": "claude-code", "host": "build-box"}
    assert askers.asker_of(named, "gate-1-2-3") == askers.Asker("claude-code", "build-box")
    assert askers.asker_of({"kind": "pi.tool_call"}, "gate-1-2-3") == askers.Asker("pi", "-")
    assert askers.asker_of("a title", "ask-123") == askers.Asker("workflow", "-")
    presented = with_context({"schema": "x", "summary": "s", "blocks": []},
                             Context("web", "shell", "laptop"))
    assert askers.asker_of(None, "ask-1", presented) == askers.Asker("workflow", "laptop")
    # The subject's own host wins over the context line; odd values are cleaned or ignored.
    assert askers.asker_of({"host": "ci"}, "ask-1", presented).host == "ci"
    assert askers.asker_of({"agent": 7, "host": "  "}, "gate-x") == askers.Asker("pi", "-")
    assert askers.asker_of({"agent": "mcp:cursor\nx"}, "x").agent == "mcp:cursor x"


# -- the audit, end to end -----------------------------------------------------------------


def _ask(db: Database, title: str, **more: Any) -> workflows.AskHandle:
    presentation = {"schema": "pi-workflows.decision-presentation.v1", "summary": title,
                    "blocks": []}
    spec = workflows.AskSpec(title=title, presentation=presentation, choices=CHOICES, **more)
    handle = workflows.create_ask(db, spec, workflows.new_owner_id(db, "test"))
    return handle


def test_audit_lists_every_approval_with_who_asked_and_who_answered(home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        pressed = open_decision_now(title="Deploy to production?")
        assert run(home, "poll").returncode == 0
        press_button(fake, pressed, "continue", 1)
        assert run(home, "poll").returncode == 0
        with Database.open_writer(clock=ShiftedClock(0)) as db:
            gated = _ask(db, "Run rm -rf build?", run_id="gate-abc-def-0001",
                         subject={"kind": "pi.tool_call", "tool": "bash",
                                  "input": {"command": "rm -rf build"}, "cwd": "/w",
                                  "agent": "claude-code", "host": "build-box"})
            workflows.release_run(db, gated.run.lease)
            report = answer_locally(db, AnswerEvent(
                decision_id=gated.decision_id, request_digest=gated.request.request_digest,
                choice="stop", entered=None, actor_id="local:1000", event_key="k-1",
                details={"source": "terminal"}), "pi-local-test", None)
            assert report.to_json()["result"] == "won"
            timed = _ask(db, "Migrate?", timeout_ms=1_000, default_choice="continue")
            assert isinstance(db.clock, ShiftedClock)
            db.clock.offset_ms += 1_500
            assert workflows.apply_deadline(db, timed.decision_id, timed.run.lease) \
                .result.value == "won"
            workflows.release_run(db, timed.run.lease)
            cancelled = _ask(db, "Ship?")
            workflows.release_run(db, cancelled.run.lease)
            workflows.cancel_decision(db, cancelled.decision_id, "superseded", "operator")
            waiting = _ask(db, "Open one?")
            workflows.release_run(db, waiting.run.lease)

    done = run(home, "audit", "--since", "1h", "--json")
    assert (done.returncode, done.stderr) == (0, "")
    rows = {r["decision_id"]: r for r in json.loads(done.stdout)}
    assert list(rows) == [h.decision_id for h in (pressed, gated, timed, cancelled, waiting)]
    by_telegram = rows[pressed.decision_id]
    assert {k: by_telegram[k] for k in ("agent", "host", "title", "outcome", "choice",
                                        "choice_label", "provenance", "who", "who_name",
                                        "channel")} == {
        "agent": "workflow", "host": "-", "title": "Deploy to production?",
        "outcome": "accepted", "choice": "continue", "choice_label": "Continue",
        "provenance": "human", "who": f"telegram-user:{USER}", "who_name": "Ada",
        "channel": "telegram:ops"}
    assert by_telegram["request_digest"] == pressed.request.request_digest
    assert by_telegram["request_digest"].startswith("sha256:")
    assert by_telegram["asked_at"] <= by_telegram["resolved_at"]
    assert by_telegram["asked_at_iso"].endswith("Z") and by_telegram["resolved_at_iso"]
    by_terminal = rows[gated.decision_id]
    assert (by_terminal["agent"], by_terminal["host"], by_terminal["who"],
            by_terminal["who_name"], by_terminal["channel"], by_terminal["provenance"],
            by_terminal["choice"]) == ("claude-code", "build-box", "local:1000", "pi terminal",
                                       "pi", "human", "stop")
    assert (rows[timed.decision_id]["provenance"], rows[timed.decision_id]["choice"],
            rows[timed.decision_id]["who"]) == ("timeout", "continue", None)
    assert (rows[cancelled.decision_id]["outcome"], rows[cancelled.decision_id]["provenance"],
            rows[cancelled.decision_id]["reason"]) == ("cancelled", "cancel", "superseded")
    assert (rows[waiting.decision_id]["outcome"], rows[waiting.decision_id]["resolved_at"],
            rows[waiting.decision_id]["provenance"]) == ("open", None, None)

    text = run(home, "audit", "--since", "2h")
    assert text.returncode == 0
    header, *lines = text.stdout.splitlines()
    assert header.split() == ["ASKED", "AGENT", "HOST", "OUTCOME", "BY", "WHO", "VIA",
                              "RESOLVED", "DIGEST", "TITLE"]
    assert len(lines) == 5
    assert "Ada (telegram-user:5123456789)" in lines[0]
    assert pressed.request.request_digest.removeprefix("sha256:")[:12] in lines[0]
    assert lines[1].split()[2:4] == ["claude-code", "build-box"]
    assert "cancelled: superseded" in lines[3] and lines[4].endswith("Open one?")

    # Only what was asked or resolved since then: a time after everything lists nothing.
    later = run(home, "audit", "--since", "2099-01-01")
    assert (later.returncode, later.stdout) == (0, "no decisions since 2099-01-01 00:00:00Z\n")
    assert run(home, "audit", "--since", "2099-01-01", "--json").stdout == "[]\n"

    # `decisions` names the asker too.
    listed = json.loads(run(home, "decisions", "--all", "--json").stdout)
    assert [(d["agent"], d["host"]) for d in listed] == [
        ("workflow", "-"), ("claude-code", "build-box"), ("workflow", "-"), ("workflow", "-"),
        ("workflow", "-")]


def test_a_decision_resolved_since_is_listed_though_asked_before(home: Path) -> None:
    with Database.open_writer(clock=ShiftedClock(0)) as db:
        old = _ask(db, "Asked long ago?")
        workflows.release_run(db, old.run.lease)
        assert isinstance(db.clock, ShiftedClock)
        db.clock.offset_ms += 3 * 86_400_000
        workflows.cancel_decision(db, old.decision_id, "stale", "operator")
        since = db.clock.now_ms() - 3_600_000
        [row] = db.read(lambda c: approvals.audit(c, since))
        assert (row.decision_id, row.outcome) == (old.decision_id, "cancelled")
        assert db.read(lambda c: approvals.audit(c, db.clock.now_ms() + 1)) == []
        # A cell never carries a line break into the table; a long reason is cut.
        assert len(render_audit([row], None)) == 2


def test_pending_on_telegram_names_the_agent_and_host(home: Path) -> None:
    with FakeBotApi(token=FLOW_TOKEN) as server:
        _configure(home, server.base_url, [str(CHAT)])
        with Database.open_writer() as db:
            flow = Flow(home, server, db)
            gated = _ask(db, "Run rm -rf build?", run_id="gate-abc-def-0002",
                         subject={"kind": "pi.tool_call", "agent": "codex", "host": "laptop"})
            workflows.release_run(db, gated.run.lease)
            plain = _ask(db, "Deploy?")
            workflows.release_run(db, plain.run.lease)
            flow.poll()
            push_command(flow, "/pending")
            flow.poll()
            listing = next(s["text"] for s in flow.sends() if "waiting" in s["text"])
    first, second = listing.split("\n")[1:]
    assert first.startswith("1. Run rm -rf build? · ") and first.endswith(" · codex on laptop")
    assert second.startswith("2. Deploy? · ") and second.endswith(" · workflow")
