"""Concurrent pollers on one profile: the channel lease lets exactly one of them poll.

Real `piw-channels poll` processes share one HOME and one fake Bot API. The fake records a
getUpdates that arrives while another is in flight as an overlap (Telegram would answer one of
them with 409), so `overlaps() == []` proves the two never polled the bot at the same time.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.telegram.fake import FakeBotApi
from tests.channels.telegram.helpers import (
    ROOT,
    TOKEN,
    channel_id_of,
    configure_telegram_profile,
    db_value,
    delivery_texts,
    finish,
    inbox_results,
    message_parts,
    open_decision_now,
    press_button,
    reap,
    resolutions,
    send_count,
    start_cli,
    wait_until,
)
from tests.conftest import child_env

# Each child imports everything, reports ready, then waits for the shared "go" file: a
# barrier, so both processes reach the lease claim at the same moment.
BARRIER_CHILD = """
import os, sys, time
from adapters.cli.main import run
barrier = sys.argv[1]
open(os.path.join(barrier, f"ready.{os.getpid()}"), "w").close()
while not os.path.exists(os.path.join(barrier, "go")):
    time.sleep(0.001)
sys.exit(run(sys.argv[2:]))
"""


@pytest.fixture
def fake(home: Path) -> Iterator[FakeBotApi]:
    with FakeBotApi(TOKEN) as server:
        configure_telegram_profile(home, server.base_url)
        yield server


def _start_behind_barrier(home: Path, barrier: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", BARRIER_CHILD, str(barrier), *args],
                            cwd=ROOT, env=child_env(home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _lease_claims() -> int:
    return int(db_value(
        "SELECT count(*) FROM events WHERE resource_id = ? AND event_type = 'channel.lease_acquired'",
        f"channel:{channel_id_of()}"))


def test_two_concurrent_pollers_on_one_profile_one_polls_and_the_other_skips_quietly(
    home: Path, fake: FakeBotApi, tmp_path: Path,
) -> None:
    handle = open_decision_now()
    [text] = delivery_texts(handle)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [_start_behind_barrier(home, barrier, "poll", "--for", "5", "-v") for _ in range(2)]
    try:
        wait_until(lambda: len(list(barrier.glob("ready.*"))) == 2, "both pollers to be ready")
        (barrier / "go").touch()
        wait_until(lambda: bool(message_parts(handle.decision_id))
                   and message_parts(handle.decision_id)[-1].message_ref is not None,
                   "the delivery to be confirmed")
        press = press_button(fake, handle, "continue",
                             int(message_parts(handle.decision_id)[-1].message_ref or 0))
        results = [finish(p, timeout=60) for p in procs]
    finally:
        for p in procs:
            reap(p)
    assert [(code, out) for code, out, _ in results] == [(0, ""), (0, "")]
    lines = sorted(err.strip() for _, _, err in results)
    assert [line.split(": ")[1] for line in lines] == ["busy", "polled"], lines
    assert lines[0] == "telegram:ops: busy: another poller holds this channel; skipped"
    assert fake.overlaps() == []
    assert _lease_claims() == 1
    assert send_count(fake, text) == 1
    assert inbox_results() == [(press, "callback", "won")]
    assert resolutions(handle.decision_id) == [("accepted", "human", str(press))]


def test_a_poller_started_while_another_polls_skips_with_no_output_once_or_when_its_window_ends(
    home: Path, fake: FakeBotApi,
) -> None:
    """`--once` skips at once; a `--for` pass waits for the lease, and ends quietly when its
    window closes before the holder releases (it never polled)."""
    open_decision_now()
    first = start_cli(home, "poll", "--for", "10")
    others: list[subprocess.Popen[str]] = []
    try:
        # The first one holds the lease: its 2nd getUpdates is the long poll (the 1st is short,
        # a delivery being due).
        assert fake.wait_received("getUpdates", 2, timeout=30)
        others = [start_cli(home, "poll", "--for", "4"), start_cli(home, "poll", "--once")]
        skipped = [finish(p, timeout=30) for p in others]
        assert first.poll() is None, "the skipping pollers waited for the first one to end"
        polled = finish(first, timeout=60)
    finally:
        for p in [first, *others]:
            reap(p)
    assert skipped == [(0, "", ""), (0, "", "")]  # cron mails any output: there is none
    assert polled == (0, "", "")
    assert fake.overlaps() == []
    assert _lease_claims() == 1
    assert len(fake.requests("sendMessage")) == 1


def test_a_poller_started_while_another_polls_takes_over_at_its_release_losing_nothing(
    home: Path, fake: FakeBotApi,
) -> None:
    """Cron runs that overlap hand over: the second waits (without polling the bot) and
    takes the lease the moment the first releases it; a decision asked and a press made
    after the hand-over are served by the second, each exactly once."""
    first_decision = open_decision_now(title="Before the hand-over?")
    [first_text] = delivery_texts(first_decision)
    first = start_cli(home, "poll", "--for", "3")
    second: subprocess.Popen[str] | None = None
    try:
        def delivered() -> bool:
            parts = message_parts(first_decision.decision_id)
            if parts and parts[-1].message_ref is not None:
                return True
            assert first.poll() is None, ("the first run ended without delivering",
                                          finish(first, timeout=30))
            return False

        wait_until(delivered, "the first run's delivery")
        second = start_cli(home, "poll", "--for", "7")
        assert finish(first, timeout=30) == (0, "", "")
        assert second.poll() is None, "the second run ended with the first"
        wait_until(lambda: _lease_claims() == 2, "the second run to take the lease over")
        after = open_decision_now(title="After the hand-over?")
        [after_text] = delivery_texts(after)
        wait_until(lambda: send_count(fake, after_text) == 1, "the second run's delivery")
        press = press_button(fake, first_decision, "continue",
                             int(message_parts(first_decision.decision_id)[-1].message_ref or 0))
        wait_until(lambda: bool(resolutions(first_decision.decision_id)), "the press to count")
        assert finish(second, timeout=30) == (0, "", "")
    finally:
        for p in [first, *([second] if second else [])]:
            reap(p)
    assert fake.overlaps() == []  # never two getUpdates at once (Telegram would answer 409)
    assert _lease_claims() == 2
    assert (send_count(fake, first_text), send_count(fake, after_text)) == (1, 1)
    assert inbox_results() == [(press, "callback", "won")]
    assert resolutions(first_decision.decision_id) == [("accepted", "human", str(press))]


def test_a_decision_asked_while_a_backlog_drains_goes_out_ahead_of_it(
    home: Path, fake: FakeBotApi,
) -> None:
    """Deliveries drain at one message a second to a chat; a decision asked meanwhile takes
    the chat's next slot (ahead of the rest of the backlog), and every card goes out once."""
    backlog = [open_decision_now(title=f"Backlog #{i}?") for i in range(6)]
    texts = [delivery_texts(h)[0] for h in backlog]
    poller = start_cli(home, "poll", "--for", "30")
    try:
        assert fake.wait_received("sendMessage", 1, timeout=30)
        late = open_decision_now(title="Asked during the backlog?")
        [late_text] = delivery_texts(late)
        wait_until(lambda: send_count(fake, late_text) == 1, "the late decision's delivery")
        wait_until(lambda: all(send_count(fake, t) == 1 for t in texts), "the backlog")
    finally:
        poller.terminate()
        reap(poller)
    order = [r.params.get("text") for r in fake.requests("sendMessage")]
    assert sorted(order, key=str) == sorted([*texts, late_text])  # each exactly once
    # The late one goes right after the send under way when it was asked (2nd or 3rd: the
    # watcher looks every 0.15 s), before the rest of the backlog (queued, it was 7th).
    assert order.index(late_text) <= 2, order
