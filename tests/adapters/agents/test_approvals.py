"""`adapters.agents.approvals`: judge, open, wait and cancel one agent's gated call, on a real
database in a temporary HOME (the clock is the test's)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from adapters.agents import approvals
from adapters.agents.approvals import Opened, Verdict
from channels.config import gate as gate_config
from channels.decisions import records
from channels.decisions.resolution import HumanAnswer, Result, resolve
from channels.pi import gating
from channels.pi.gating import GatedCall
from state.clock import ManualClock
from state.database import Database
from tests.channels.telegram.helpers import config_dir, configure_telegram_profile

PUSH = "git push origin main"
SESSION = "claude-session-1"


def call(home: Path, command: str = PUSH, **extra: Any) -> GatedCall:
    return GatedCall("bash", {"command": command, **extra}, str(home), agent="claude-code",
                     host="laptop")


def enable_gate(home: Path, **changes: Any) -> None:
    gate_config.write_gate_policy(config_dir(home), dataclasses.replace(
        gate_config.DEFAULT_POLICY, enabled=True, **changes))


def open_call(db: Database, home: Path, gated: GatedCall) -> Verdict | Opened:
    return approvals.open_call(db, gated, session_id=SESSION, owner_id="hook:test:1:ab",
                               config_dir=config_dir(home))


def answer(db: Database, opened: Opened, choice: str, text: str | None = None) -> None:
    response: dict[str, Any] = {"choice": choice}
    if text is not None:
        response["input"] = {gating.REASON_INPUT: text}
    verdict = db.write(lambda c: resolve(c, HumanAnswer(
        opened.decision_id, opened.handle.request.request_digest, response, "telegram:ops",
        "telegram:42", f"event-{choice}", f"key-{choice}"), db.clock.now_ms(),
        allowed_channels=("telegram:ops",)))
    assert verdict.result is Result.WON, verdict


def opened_call(db: Database, home: Path, gated: GatedCall | None = None) -> Opened:
    configure_telegram_profile(home, "http://127.0.0.1:9")
    enable_gate(home)
    found = open_call(db, home, gated or call(home))
    assert isinstance(found, Opened), found
    return found


def test_with_the_gate_off_a_push_is_allowed_and_no_decision_is_opened(
        home: Path, db: Database) -> None:
    verdict = open_call(db, home, call(home))
    assert verdict == Verdict(True, "Allowed by the gate policy: no rule matches this call",
                              None, None, None)
    assert db.conn.execute("SELECT count(*) FROM human_decisions").get == 0


def test_the_guard_blocks_reading_the_state_database_even_with_the_gate_off(
        home: Path, db: Database) -> None:
    state = home / ".pi" / "agent" / "workflows" / "state.sqlite"
    verdict = open_call(db, home, call(home, f"sqlite3 {state} 'DELETE FROM human_decisions'"))
    assert isinstance(verdict, Verdict) and not verdict.allow
    assert verdict.message.startswith("Blocked") and verdict.decision_id is None


def test_a_broken_policy_blocks_what_it_would_ask_about(home: Path, db: Database) -> None:
    path = config_dir(home) / "gate.json"
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_text('{"schema": "pi-workflows.gate.v1", "enabled": "yes"}')
    path.chmod(0o600)
    found, policy = approvals.judge_call(call(home), config_dir=config_dir(home), home=home)
    assert policy is None and found.action == "block"
    assert "the gate policy is broken" in found.reason and found.rule == "bash: git push"


def test_with_no_telegram_route_nobody_can_be_asked(home: Path, db: Database) -> None:
    enable_gate(home)
    verdict = open_call(db, home, call(home))
    assert verdict == Verdict(False, "Denied: nobody can be asked (audience 'operator' routes"
                              " to no Telegram chat)", None, None, "bash: git push")
    assert db.conn.execute("SELECT count(*) FROM human_decisions").get == 0


def test_a_gated_call_opens_a_decision_bound_to_its_exact_input_agent_and_host(
        home: Path, db: Database) -> None:
    opened = opened_call(db, home, call(home, description="Push the branch"))
    assert opened.rule == "bash: git push" and opened.timeout_minutes == 10
    decision = db.read(lambda c: records.load(c, opened.decision_id))
    assert decision.request.document["subject"] == {
        "kind": "agent.tool_call", "tool": "bash", "agent": "claude-code", "host": "laptop",
        "cwd": str(home), "input": {"command": PUSH, "description": "Push the branch"}}
    assert decision.request.document["title"] == "Claude Code wants to run a command"
    assert db.conn.execute("SELECT workflow_ref FROM runs").get == "piw-channels.gate"


def test_waiting_until_a_moment_returns_none_and_lets_the_run_go(
        home: Path, db: Database, clock: ManualClock) -> None:
    opened = opened_call(db, home)
    assert opened.wait(db, until_ms=clock.now_ms()) is None
    assert db.conn.execute("SELECT owner_id FROM leases WHERE resource_id LIKE 'run:%'"
                           ).get is None
    answer(db, opened, gating.ALLOW)  # answered while nobody waited: the next wait sees it
    verdict = opened.wait(db)
    assert verdict == Verdict(True, "Allowed on Telegram", gating.ALLOW, opened.decision_id,
                              "bash: git push")
    assert db.conn.execute("SELECT status FROM runs").get == "completed"


def test_a_denial_with_a_reason_is_what_the_agent_is_told(home: Path, db: Database) -> None:
    opened = opened_call(db, home)
    answer(db, opened, gating.DENY_REASON, "not on a Friday")
    verdict = opened.wait(db)
    assert verdict is not None and not verdict.allow
    assert verdict.message == "Denied on Telegram: not on a Friday"
    assert verdict.choice == gating.DENY_REASON


def test_the_deadline_denies_and_nobody_is_said_to_have_chosen(
        home: Path, db: Database, clock: ManualClock) -> None:
    opened = opened_call(db, home)
    clock.advance(10 * 60_000)
    verdict = opened.wait(db)
    assert verdict == Verdict(False, "Denied: no answer within 10 minutes", None,
                              opened.decision_id, "bash: git push")
    row = db.conn.execute("SELECT outcome, provenance FROM human_decision_resolutions").get
    assert row == ("accepted", "timeout_policy")


def test_allowed_for_the_session_stops_asking_for_that_input_in_that_session_only(
        home: Path, db: Database) -> None:
    opened = opened_call(db, home)
    answer(db, opened, gating.ALLOW_SESSION)
    assert opened.wait(db) is not None
    again = open_call(db, home, call(home))
    assert isinstance(again, Verdict) and again.allow
    assert again.message.startswith("Allowed: this exact input was allowed for this session")
    assert again.decision_id == opened.decision_id
    other = approvals.open_call(db, call(home), session_id="another", owner_id="hook:test:2:cd",
                                config_dir=config_dir(home))
    assert isinstance(other, Opened)
    changed = open_call(db, home, call(home, PUSH + " --force"))
    assert isinstance(changed, Opened)


def test_cancelling_settles_the_decision_and_never_allows(home: Path, db: Database) -> None:
    opened = opened_call(db, home)
    opened.wait(db, until_ms=0)
    verdict = opened.cancel(db, "Claude Code stopped waiting", "hook:test:1:ab")
    assert verdict == Verdict(False, "Cancelled: Claude Code stopped waiting", None,
                              opened.decision_id, "bash: git push")
    assert db.conn.execute("SELECT outcome FROM human_decision_resolutions").get == "cancelled"
    assert db.conn.execute("SELECT status FROM runs").get == "cancelled"


def test_an_answer_that_won_before_the_cancel_stands(home: Path, db: Database) -> None:
    opened = opened_call(db, home)
    answer(db, opened, gating.DENY)
    verdict = opened.cancel(db, "gave up", "hook:test:1:ab")
    assert verdict.message == "Denied on Telegram" and verdict.choice == gating.DENY
