"""Fewer commits per press, the same guarantees: a settlement is one intent commit and one
confirm commit; finishing the runs of a pass is one commit; and a crash between a
settlement's two commits leaves its outcome post ambiguous, never posted twice."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import pytest

from adapters.telegram.fake import FakeBotApi, Fault
from channels.decisions import records, resolution, views, workflows
from channels.decisions.resolution import HumanAnswer
from channels.telegram.reservations import PROMPT
from state import effects, resources
from state.database import Database, default_path
from state.resources import Actor
from tests.channels.telegram.helpers import (
    TOKEN,
    USER,
    channel_id_of,
    configure_telegram_profile,
    cursor_value,
    db_rows,
    db_value,
    effect_statuses,
    expire_poller_leases,
    inbox_results,
    inbox_states,
    kill_hard,
    live_lease_owners,
    message_parts,
    message_statuses,
    open_decision,
    open_decision_now,
    out_of_process_fake,
    outcome_count,
    poll_in_process,
    press_button,
    reap,
    run_cli,
    sent_texts,
    start_cli,
    submissions_of_update,
    wait_in_flight,
    write_token_file,
)
from tests.conftest import child_env

SETTLE = "telegram.settle"


@contextmanager
def commits(db: Database) -> Iterator[list[int]]:
    """Commits that wrote something (an empty transaction, such as a lease renewal with
    time left, writes no WAL frame and costs no fdatasync)."""
    counter = [0]
    seen = [db.conn.total_changes()]

    def hook() -> bool:
        if db.conn.total_changes() != seen[0]:
            counter[0] += 1
            seen[0] = db.conn.total_changes()
        return False

    db.conn.set_commit_hook(hook)
    try:
        yield counter
    finally:
        db.conn.set_commit_hook(None)


def test_a_settlement_is_one_intent_commit_and_one_confirm_commit(home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            handle = open_decision(db)
            poll_in_process(db)  # delivered
            workflows.cancel_decision(db, handle.decision_id, "not needed", "operator")
            assert effect_statuses(handle.decision_id, SETTLE) == ["pending"]
            with commits(db) as count:
                poll_in_process(db)
            # lease claim, the settlement's intent and confirm, lease release
            assert count == [4]
        assert effect_statuses(handle.decision_id, SETTLE) == ["applied"]
        assert message_statuses(handle.decision_id, "settlement") == ["confirmed"]
        [post] = message_parts(handle.decision_id, "settlement")
        assert post.conversation_ref == str(USER) and post.message_ref is not None
        assert len(fake.requests("editMessageReplyMarkup")) == 1
        assert sum(1 for text in sent_texts(fake) if re.fullmatch(
            r"Cancelled at \d\d:\d\d UTC: not needed\nApprove the plan\?\nDecision \w{12}",
            text)) == 1


def test_finishing_the_runs_of_several_resolved_decisions_is_one_commit(home: Path) -> None:
    with Database.open_writer() as db:
        handles = [open_decision(db, title=f"Plan {i}?") for i in range(3)]
        for i, h in enumerate(handles):
            answer = HumanAnswer(h.decision_id, h.request.request_digest,
                                 {"choice": "continue"}, "pi", "local:1", f"e{i}", f"k{i}")
            db.write(lambda c, a=answer: resolution.resolve(c, a, db.clock.now_ms()))
        assert len(db.read(lambda c: views.pending_continuations(c, workflows.ASK_WORKFLOW))) \
            == 3
        with commits(db) as count:
            report = workflows.expire_overdue(db, "expire-1")
        assert count == [1]
        assert sorted(report.continued) == sorted(h.decision_id for h in handles)
        assert db.read(lambda c: views.pending_continuations(c, workflows.ASK_WORKFLOW)) == []
        statuses = {str(s) for (s,) in db.conn.execute("SELECT status FROM runs")}
        assert statuses == {"completed"}
        leases = db.conn.execute(
            "SELECT count(*) FROM leases WHERE owner_id IS NOT NULL").get
        assert leases == 0  # each run was claimed and released inside the one commit


def test_sigkill_between_the_settlement_commits_leaves_the_outcome_post_ambiguous(
    home: Path,
) -> None:
    token_file = write_token_file(home)
    with out_of_process_fake(token_file) as server:
        fake = server.control
        configure_telegram_profile(home, server.base_url)
        handle = open_decision_now()
        assert run_cli(home, "poll", "--once").returncode == 0  # delivered
        sends = len(fake.requests("sendMessage"))
        press_button(fake, handle, "continue", 1)
        fake.inject("sendMessage", Fault.hang())  # the outcome post: after the intent commit
        poller = start_cli(home, "poll", "--for", "60")
        try:
            wait_in_flight(fake, "sendMessage", sends + 1)
            kill_hard(poller)
        finally:
            reap(poller)
        assert effect_statuses(handle.decision_id, SETTLE) == ["applying"]
        [intent] = message_parts(handle.decision_id, "settlement")
        assert (intent.conversation_ref, intent.message_ref) == (None, None)
        fake.release()  # the post did reach the chat

        assert expire_poller_leases(poller.pid) >= 2  # the channel and the settle effect
        assert run_cli(home, "poll", "--once").returncode == 0
        assert run_cli(home, "poll", "--once").returncode == 0
        assert effect_statuses(handle.decision_id, SETTLE) == ["ambiguous"]
        assert message_statuses(handle.decision_id, "settlement") == ["ambiguous"]
        assert outcome_count(fake, "Continue", USER) == 1
        assert live_lease_owners() == []


def _delivered_refs() -> dict[str, int]:
    """decision -> the Telegram message its delivery is (the delivery order need not be the
    creation order: decisions opened in the same millisecond)."""
    return {str(d): int(r) for d, r in db_rows(
        "SELECT m.decision_id, p.external_message_ref FROM channel_message_parts p"
        " JOIN channel_messages m USING (message_id) WHERE m.purpose = 'delivery'")}


def expire_dead_leases() -> None:
    """Let every lease expire now (the killed poller's; test-only raw SQL)."""
    conn = apsw.Connection(str(default_path()))
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("UPDATE leases SET expires_at = 0 WHERE owner_id IS NOT NULL"
                     " AND expires_at > ?", (int(time.time() * 1000) - 1,))
    finally:
        conn.close()


KILL_ON_SECOND_ROW = """
import os, signal, sys
from channels.telegram import inbound
real = inbound.process
seen = []
def process(conn, channel, index, lease, row, now):
    result = real(conn, channel, index, lease, row, now)
    seen.append(row.external_event_id)
    if len(seen) == 2:  # inside the batch's transaction, after two rows' writes
        os.kill(os.getpid(), signal.SIGKILL)
    return result
inbound.process = process
sys.argv = ["piw-channels", "poll", "--once"]
from adapters.cli.main import main
main()
"""


def test_sigkill_inside_the_batch_transaction_undoes_the_batch_and_loses_no_press(
    home: Path,
) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            handles = [open_decision(db, title=f"Plan {i}?") for i in range(3)]
        assert run_cli(home, "poll", "--once").returncode == 0  # delivered
        refs = _delivered_refs()
        presses = [press_button(fake, h, "continue", refs[h.decision_id]) for h in handles]
        killed = subprocess.run([sys.executable, "-c", KILL_ON_SECOND_ROW], env=child_env(home),
                                capture_output=True, text=True, timeout=60)
        assert killed.returncode == -signal.SIGKILL
        # The ingest committed (the cursor moved); the batch's processing did not: no row is
        # processed, nothing resolved, no callback answered.
        assert cursor_value() == presses[-1] + 1
        assert [s.processed for s in inbox_states()] == [False, False, False]
        assert db_value("SELECT count(*) FROM human_decision_submissions") == 0
        assert fake.requests("answerCallbackQuery") == []

        expire_dead_leases()
        assert run_cli(home, "poll", "--once").returncode == 0
        assert [r for _, _, r in inbox_results()] == ["won", "won", "won"]
        for handle, press in zip(handles, presses, strict=True):
            assert submissions_of_update(press) == [(handle.decision_id, "won")]
            assert effect_statuses(handle.decision_id, SETTLE) == ["applied"]
        answered = sorted(str(r.params["callback_query_id"])
                          for r in fake.requests("answerCallbackQuery"))
        assert len(answered) == len(set(answered)) == 3
        assert live_lease_owners() == []


def test_a_row_that_hits_a_bug_is_undone_alone_inside_the_batch(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from channels.telegram import inbound

    real = inbound.process
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            handles = [open_decision(db, title=f"Plan {i}?") for i in range(3)]
            poll_in_process(db)
            refs = _delivered_refs()
            presses = [press_button(fake, h, "continue", refs[h.decision_id]) for h in handles]

            def process(conn: Any, channel: Any, index: Any, lease: Any, row: Any,
                        now: int) -> Any:
                result = real(conn, channel, index, lease, row, now)
                if row.external_event_id == str(presses[1]):
                    raise RuntimeError("a bug after the row's writes")
                return result

            monkeypatch.setattr(inbound, "process", process)
            poll_in_process(db)
            results = [r for _, _, r in inbox_results()]
        assert results == ["won", "ignored:error", "won"]
        assert submissions_of_update(presses[1]) == []  # its writes were undone
        assert effect_statuses(handles[1].decision_id, SETTLE) == []
        for i in (0, 2):
            assert submissions_of_update(presses[i]) == [(handles[i].decision_id, "won")]
        # Every press is answered; the one that hit the bug says so (never a silent spinner).
        answers = [r.params.get("text") for r in fake.requests("answerCallbackQuery")]
        assert len(answers) == 3 and answers.count(inbound.FAILED_TEXT) == 1


def test_a_row_whose_effect_contradicts_a_stored_one_is_ignored_not_the_batch(
    home: Path,
) -> None:
    """A stored effect under the same key with another payload (an older version wrote it)
    must not undo the batch: undone, the same rows come back every pass and the channel is
    wedged. The row is recorded as ignored:error, the others are processed, the cursor moves."""
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            handles = [open_decision(db, title=f"Plan {i}?") for i in range(3)]
            poll_in_process(db)
            channel = channel_id_of()
            decision = db.read(lambda c: records.load(c, handles[1].decision_id))
            db.write(lambda c: effects.reserve(
                c, source_resource_id=decision.resource_id,
                source_revision=resources.current_revision(c, decision.resource_id) or 0,
                effect_type=PROMPT, idempotency_key=f"{channel}:{USER}:replan",
                payload={"decisionId": decision.decision_id, "choiceId": "replan",
                         "channelId": channel, "chatId": str(USER), "text": "older"},
                owner_scope="channel", actor=Actor("channel", "older"), now=db.clock.now_ms()))
            refs = _delivered_refs()
            presses = [press_button(fake, h, c, refs[h.decision_id])
                       for h, c in zip(handles, ("continue", "replan", "continue"), strict=True)]
            poll_in_process(db)
            assert [r for _, _, r in inbox_results()] == ["won", "ignored:error", "won"]
            assert cursor_value() == presses[-1] + 1
            poll_in_process(db)  # nothing comes back
            assert [r for _, _, r in inbox_results()] == ["won", "ignored:error", "won"]


def test_the_settlements_of_a_batch_go_out_concurrently(home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            handles = [open_decision(db, title=f"Plan {i}?") for i in range(2)]
            poll_in_process(db)
            refs = _delivered_refs()
            for h in handles:
                press_button(fake, h, "continue", refs[h.decision_id])
            for _ in handles:
                fake.inject("editMessageReplyMarkup", Fault.delay(1.0))
            poll_in_process(db)
        first, second = sorted(fake.requests("editMessageReplyMarkup"),
                               key=lambda r: r.started_at)
        assert first.ended_at is not None
        assert second.started_at < first.ended_at  # the second did not wait for the first
        for h in handles:
            assert effect_statuses(h.decision_id, SETTLE) == ["applied"]
