"""Fewer commits per press, the same guarantees: a settlement is one intent commit and one
confirm commit; finishing the runs of a pass is one commit; and a crash between a
settlement's two commits leaves its outcome post ambiguous, never posted twice."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from adapters.telegram.fake import FakeBotApi, Fault
from channels.decisions import resolution, views, workflows
from channels.decisions.resolution import HumanAnswer
from state.database import Database
from tests.channels.telegram.helpers import (
    TOKEN,
    USER,
    configure_telegram_profile,
    effect_statuses,
    expire_poller_leases,
    kill_hard,
    live_lease_owners,
    message_parts,
    message_statuses,
    open_decision,
    open_decision_now,
    out_of_process_fake,
    poll_in_process,
    press_button,
    reap,
    run_cli,
    send_count,
    start_cli,
    wait_in_flight,
    write_token_file,
)

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
        assert send_count(fake, "Cancelled: not needed\nApprove the plan?") == 1


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
        assert send_count(fake, "Accepted: Continue\nApprove the plan?", USER) == 1
        assert live_lease_owners() == []
