"""A `poll --for` window does not make a decision wait for the long poll in flight, nor a press
wait behind a backlog of deliveries; and what it watches for costs no write (wakeups.py).

Real `poll --for` processes against the in-process fake Bot API, which records every request
with the moment it arrived and the moment it was answered: the assertions are on that order
and on rows in the database, never on durations."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

from adapters.telegram.fake import FakeBotApi, Fault
from channels.telegram import wakeups
from state.database import Database
from tests.channels.telegram.helpers import (
    TOKEN,
    configure_telegram_profile,
    db_rows,
    db_value,
    finish,
    message_statuses,
    open_decision,
    open_decision_now,
    poll_in_process,
    press_button,
    reap,
    reply_to_prompt,
    resolutions,
    start_cli,
    wait_in_flight,
    wait_until,
)


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM a poller: it releases its lease and exits 143."""
    proc.send_signal(signal.SIGTERM)
    code, _, err = finish(proc)
    assert code == 143, err


def test_a_decision_asked_during_a_long_poll_is_sent_before_that_long_poll_returns(
        home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        proc = start_cli(home, "poll", "--for", "40")
        try:
            long_poll = wait_in_flight(fake, "getUpdates")
            assert int(long_poll.params["timeout"]) >= 10  # a real long poll, not a short one
            handle = open_decision_now()
            wait_until(lambda: message_statuses(handle.decision_id) == ["confirmed"],
                       "the delivery to be confirmed")
            [send] = fake.requests("sendMessage")
            polls = fake.requests("getUpdates")
            _stop(proc)
        finally:
            reap(proc)
    assert "Approve the plan?" in str(send.params["text"])
    # The sendMessage arrived while the first long poll was still waiting, and no other
    # getUpdates had started: the decision did not wait for the long poll to end.
    assert [p.seq for p in polls if p.started_at <= send.started_at] == [long_poll.seq]
    assert polls[0].ended_at is None or polls[0].ended_at > send.started_at


def test_a_press_during_a_backlog_is_processed_and_settled_before_the_backlog_is_sent(
        home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            pressed = open_decision(db, title="Pressed first?")
            poll_in_process(db)  # delivered: message 1
            backlog = [open_decision(db, title=f"Backlog {i}?") for i in range(5)]
        # Every backlog send is held a while (a rate-limited chat): the drain takes seconds.
        fake.inject("sendMessage", Fault.delay(1.0, times=5))
        proc = start_cli(home, "poll", "--for", "40")
        try:
            wait_in_flight(fake, "sendMessage", 2)  # the first backlog delivery is held
            press_button(fake, pressed, "continue", 1)
            wait_until(lambda: all(message_statuses(h.decision_id) == ["confirmed"]
                                   for h in backlog), "the backlog to be delivered")
            wait_until(lambda: db_value(
                "SELECT count(*) FROM effects WHERE effect_type = 'telegram.settle'"
                " AND status = 'applied'") == 1, "the settlement")
            requests = fake.requests()
            _stop(proc)
        finally:
            reap(proc)
    assert [r[0] for r in resolutions(pressed.decision_id)] == ["accepted"]
    order = [(r.method, str(r.params.get("text", ""))) for r in requests]
    backlog_sends = [i for i, (m, text) in enumerate(order)
                     if m == "sendMessage" and "Backlog" in text]
    answer = next(i for i, (m, _) in enumerate(order) if m == "answerCallbackQuery")
    edit = next(i for i, (m, _) in enumerate(order) if m == "editMessageReplyMarkup")
    assert len(backlog_sends) == 5
    # The press was fetched, answered and its keyboard removed while the backlog drained,
    # not after it: the answer and the settlement go ahead of the deliveries still pending.
    assert answer < backlog_sends[-1] and edit < backlog_sends[-1], order
    resolved_at = db_value("SELECT resolved_at FROM human_decision_resolutions"
                           " WHERE decision_id = ?", pressed.decision_id)
    delivered_at = [int(t) for (t,) in db_rows(
        "SELECT settled_at FROM effects WHERE effect_type = 'telegram.deliver'"
        " AND source_resource_id IN (" + ",".join("?" * len(backlog)) + ")",
        *[f"decision:{h.decision_id}" for h in backlog])]
    assert resolved_at < max(delivered_at)


def test_a_settlement_that_waits_does_not_keep_the_next_press_waiting(home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            first = open_decision(db, title="First?")
            second = open_decision(db, title="Second?")
            poll_in_process(db)  # delivered: messages 1 and 2
        # The first settlement's keyboard edit hangs (a slow or rate-limited chat).
        # (Held 4 s: less than the client's read timeout, so the edit succeeds in the end.)
        fake.inject("editMessageReplyMarkup", Fault.delay(4.0, times=1))
        proc = start_cli(home, "poll", "--for", "40")
        try:
            press_button(fake, first, "continue", 1)
            edit = wait_in_flight(fake, "editMessageReplyMarkup")
            press_button(fake, second, "stop", 2)
            wait_until(lambda: bool(resolutions(second.decision_id)), "the second press")
            still_waiting = fake.requests("editMessageReplyMarkup")[0].ended_at is None
            wait_until(lambda: db_value(
                "SELECT count(*) FROM effects WHERE effect_type = 'telegram.settle'"
                " AND status = 'applied'") == 2, "both settlements")
            polls = fake.requests("getUpdates")
            _stop(proc)
        finally:
            reap(proc)
    assert [r[0] for r in resolutions(first.decision_id)] == ["accepted"]
    assert [r[0] for r in resolutions(second.decision_id)] == ["accepted"]
    # The second press was fetched and resolved while the first keyboard edit still hung:
    # the pass went back to getUpdates instead of waiting for the settlement.
    assert still_waiting
    assert any(edit.started_at < p.started_at for p in polls)


def test_commits_by_others_during_an_idle_window_make_the_poller_write_nothing(
        home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            poll_in_process(db)  # registers the channel
            before = int(db.conn.execute("SELECT max(event_seq) FROM events").get)
        proc = start_cli(home, "poll", "--for", "8")
        try:
            wait_in_flight(fake, "getUpdates", 2)  # the window's long poll
            with Database.open_writer() as db:
                # Commits the watcher sees, none of them work for Telegram: decisions for an
                # audience that routes elsewhere.
                for i in range(3):
                    open_decision(db, title=f"Elsewhere {i}?", audience="elsewhere")
            # From here to the release at the window's end the poller commits nothing: every
            # commit seen while it runs must be that release (its channel lease is free).
            with Database.open_reader() as watcher:
                seen = int(watcher.conn.execute("PRAGMA data_version").get)
                while proc.poll() is None:
                    version = int(watcher.conn.execute("PRAGMA data_version").get)
                    if version != seen:
                        seen = version
                        held = watcher.conn.execute(
                            "SELECT count(*) FROM leases WHERE resource_id LIKE 'channel:%'"
                            " AND owner_id IS NOT NULL").get
                        assert held == 0, "the poller committed during its idle window"
                    time.sleep(0.02)
            code, _, err = finish(proc)
        finally:
            reap(proc)
    assert code == 0, err
    poller = [str(t) for (t,) in db_rows(
        "SELECT event_type FROM events WHERE event_seq > ? AND actor_id LIKE 'poll:%'"
        " ORDER BY event_seq", before)]
    assert poller == ["channel.lease_acquired", "channel.lease_released"]
    assert db_value("SELECT count(*) FROM effects WHERE effect_type LIKE 'telegram.%'") == 0


def test_in_a_window_the_prompt_of_a_text_choice_follows_the_answer_to_its_press(
        home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            handle = open_decision(db)
            poll_in_process(db)  # delivered: message 1
        fake.inject("answerCallbackQuery", Fault.delay(1.0))  # a slow answer
        proc = start_cli(home, "poll", "--for", "40")
        try:
            wait_in_flight(fake, "getUpdates", 2)
            press_button(fake, handle, "replan", 1)
            wait_until(lambda: len(fake.requests("sendMessage")) >= 2, "the prompt")
            [answer] = fake.requests("answerCallbackQuery")
            prompt = fake.requests("sendMessage")[1]
            _stop(proc)
        finally:
            reap(proc)
    assert "What should change?" in str(prompt.params["text"])
    # The sending side saw the batch's commit at once, yet held the prompt until the answer
    # that announces it was out.
    assert answer.ended_at is not None and prompt.started_at >= answer.ended_at


def test_a_window_that_ends_during_a_backlog_leaves_the_rest_unattempted_for_the_next_run(
        home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            backlog = [open_decision(db, title=f"Backlog {i}?") for i in range(12)]
        fake.inject("sendMessage", Fault.delay(1.0, times=12))  # a slow, rate-limited chat
        proc = start_cli(home, "poll", "--for", "4")
        try:
            code, _, err = finish(proc)
        finally:
            reap(proc)
        assert code == 0, err
        rows = db_rows(
            "SELECT e.status, (SELECT count(*) FROM effect_attempts a"
            " WHERE a.effect_id = e.effect_id) FROM effects e"
            " WHERE e.effect_type = 'telegram.deliver'")
        statuses = sorted(str(status) for status, _ in rows)
        # The run stopped sending when its window ended (the next cron run takes over the
        # rest): some deliveries were never attempted, and nothing was left half-sent.
        assert len(rows) == 12 and "applied" in statuses and "pending" in statuses, statuses
        assert set(statuses) == {"applied", "pending"}, statuses
        assert all(attempts == 0 for status, attempts in rows if status == "pending"), rows
        with Database.open_writer() as db:
            poll_in_process(db)  # the next pass delivers the rest
        assert all(message_statuses(h.decision_id) == ["confirmed"] for h in backlog)


def test_in_a_window_a_notice_to_a_person_is_sent(home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            handle = open_decision(db)
            poll_in_process(db)  # delivered: message 1
        proc = start_cli(home, "poll", "--for", "40")
        try:
            wait_in_flight(fake, "getUpdates", 2)
            reply_to_prompt(fake, 1, "decision", "yes please")  # a reply to the card, unclear
            wait_until(lambda: any("Reply with a number" in str(r.params.get("text"))
                                   for r in fake.requests("sendMessage")), "the hint")
            _stop(proc)
        finally:
            reap(proc)
    assert message_statuses(handle.decision_id) == ["confirmed"]


def test_the_watcher_looks_once_as_it_starts_so_a_commit_just_before_its_baseline_is_not_missed(
        home: Path) -> None:
    """A pass looks for new decisions, then starts its watcher: a decision committed between
    the two moves data_version before the watcher's baseline, so only a first look finds it
    (found at a cron hand-over: a delivery waited for the next long poll to end)."""
    calls: list[int] = []

    async def watch_a_while() -> None:
        with Database.open_writer() as db:
            open_decision(db)  # committed before the watcher starts; nothing commits after
            task = asyncio.ensure_future(wakeups.watch(db, lambda: calls.append(1)))
            await asyncio.sleep(3 * wakeups.WATCH_SECONDS)
            await wakeups.stop(task)

    asyncio.run(watch_a_while())
    assert calls == [1]
