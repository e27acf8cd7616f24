"""Notifications on Telegram, through real `notify` and `poll` processes and the fake Bot API
in a process of its own: one status card per run, edited in place (coalesced), the result as a
new message that notifies and replies to the card, a repeated index adopted, a conflicting one
refused, and a SIGKILL during a delivery that neither duplicates nor loses one."""

from __future__ import annotations

import json
from pathlib import Path

from adapters.telegram.fake import Fault
from adapters.telegram.fake.faults import BotError
from channels.notifications.producing import TELEGRAM_NOTIFY
from channels.telegram.limits import TELEGRAM_TEXT_LIMIT
from channels.text import utf16_len
from tests.channels.telegram.helpers import (
    USER,
    db_rows,
    expire_poller_leases,
    finish,
    reap,
    run_cli,
    start_cli,
    wait_in_flight,
    wait_until,
)
from tests.channels.telegram.notification_flow import (
    edits,
    kill_poll_during,
    notification_chat,
    notify,
    notify_effects,
    poll_once,
    sends,
    texts_starting,
)


def test_three_progress_notes_then_a_result_give_one_edited_card_and_one_final_message(
        home: Path) -> None:
    with notification_chat(home) as fake:
        run = notify(home, "--progress", "Step 1 of 3: migrating the schema")
        poll_once(home)
        [card] = sends(fake)
        assert card["chat_id"] == str(USER) and card["disable_notification"] == "true"
        assert card["text"].startswith("In progress\n\nStep 1 of 3: migrating the schema\n\n")
        assert f"Run {run}" in card["text"] and "Updated " in card["text"]
        assert card["entities"][0] == {"type": "bold", "offset": 0, "length": 11}
        card_id = fake.requests("sendMessage")[0].result["message_id"]

        notify(home, "--run", run, "--progress", "Step 2 of 3: copying rows")
        notify(home, "--run", run, "--progress", "Step 3 of 3: checking")
        notify(home, "--run", run, "--final", "All 12 migrations applied.")
        poll_once(home)
        # Step 2 was overtaken before it went: the latest text wins, one edit, then the
        # result, replying to the card, with sound.
        [edit] = edits(fake)
        assert edit["message_id"] == str(card_id) and "Step 3 of 3: checking" in edit["text"]
        sent = sends(fake)
        assert len(sent) == 2
        final = sent[1]
        assert final["text"].startswith("Finished\n\nAll 12 migrations applied.\n\n")
        assert final.get("disable_notification") is None
        assert final["reply_parameters"]["message_id"] == card_id
        effects = notify_effects(run)
        assert effects[1][1] != "" and [s for s, _ in effects] == ["applied"] * 4
        poll_once(home)  # nothing more goes out
        assert len(sends(fake)) == 2 and len(edits(fake)) == 1
        shown = run_cli(home, "show", run)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.splitlines()[0] == f"run {run}: 4 notifications"
        deliveries = [line.strip() for line in shown.stdout.splitlines() if "telegram:" in line]
        assert deliveries == ["telegram:ops: applied (1 attempt)",
                              "telegram:ops: superseded (1 attempt)",
                              "telegram:ops: applied (1 attempt)",
                              "telegram:ops: applied (1 attempt)"]
        status = run_cli(home, "status", "--json")
        assert status.returncode == 0, status.stderr
        notes = json.loads(status.stdout)["notifications"]
        assert [(n["index"], n["type"], n["deliveries"]) for n in notes] == [
            (i, t, [{"target": "telegram:ops", "status": st}]) for i, t, st in
            [(0, "progress", "applied"), (1, "progress", "superseded"),
             (2, "progress", "applied"), (3, "final", "applied")]]


def test_edits_of_a_card_are_coalesced_to_one_per_ten_seconds(home: Path) -> None:
    with notification_chat(home) as fake:
        run = notify(home, "--progress", "Phase 1")
        poll_once(home)
        notify(home, "--run", run, "--progress", "Phase 2")
        poll_once(home)  # the card was sent a moment ago: the edit waits for its slot
        assert edits(fake) == [] and [s for s, _ in notify_effects(run)] == ["applied", "pending"]
        assert db_rows("SELECT count(*) FROM effect_attempts a JOIN effects e USING (effect_id)"
                       " WHERE e.effect_type = ?", TELEGRAM_NOTIFY) == [(1,)]  # waiting is no attempt
        poll_once(home, ahead_ms=11_000)  # 11 s later
        [edit] = edits(fake)
        assert "Phase 2" in edit["text"]
        assert [s for s, _ in notify_effects(run)] == ["applied", "applied"]


def test_a_repeated_index_adopts_and_a_conflicting_one_is_refused(home: Path) -> None:
    with notification_chat(home) as fake:
        run = notify(home, "--final", "Report ready", "--index", "7")
        again = run_cli(home, "notify", "--run", run, "--index", "7", "--final", "Report ready")
        assert again.returncode == 0
        refused = run_cli(home, "notify", "--run", run, "--index", "7", "--final", "Other")
        assert refused.returncode == 2 and "another text" in refused.stderr
        poll_once(home)
        poll_once(home)
        assert [s["text"].split("\n")[2] for s in sends(fake)] == ["Report ready"]


def test_a_long_result_is_split_and_a_long_progress_shortened_never_refused(home: Path) -> None:
    with notification_chat(home) as fake:
        long = "\n".join(f"line {i}: " + "détail " * 20 for i in range(90))
        run = notify(home, "--progress", long)
        notify(home, "--run", run, "--final", long)
        poll_once(home)
        card, *parts = sends(fake)
        assert utf16_len(card["text"]) <= TELEGRAM_TEXT_LIMIT and "…" in card["text"]
        assert len(parts) >= 3
        assert all(utf16_len(p["text"]) <= TELEGRAM_TEXT_LIMIT for p in parts)
        assert parts[0]["text"].endswith(f"\n\n1/{len(parts)}")
        assert [p.get("disable_notification") for p in parts] == \
            [None] + ["true"] * (len(parts) - 1)


def test_sigkill_while_the_result_is_on_the_wire_never_sends_it_twice(home: Path) -> None:
    with notification_chat(home) as fake:
        run = notify(home, "--progress", "Working")
        poll_once(home)
        notify(home, "--run", run, "--final", "Done at last")
        killed = kill_poll_during(home, fake, "sendMessage", 2)
        fake.release()  # the held result reaches the chat: it may have arrived
        assert expire_poller_leases(killed) >= 1
        stderr = poll_once(home, code=75)
        assert stderr.startswith(f"Error: telegram:ops: the final notification 1 of run {run}"
                                 f" may not have arrived in chat {USER}"), stderr
        poll_once(home, code=75)
        assert texts_starting(fake, "Finished") == 1
        assert [s for s, _ in notify_effects(run)] == ["applied", "ambiguous"]
        # The read side agrees: an alert in `status` (exit 75), marked in `show`.
        status = run_cli(home, "status")
        assert status.returncode == 75
        assert f"the final notification 1 of run {run} may not have arrived" in status.stdout
        assert str(USER) not in status.stdout  # a private chat's id is its user's id
        shown = run_cli(home, "show", run)
        assert "#1 final" in shown.stdout and "(needs attention)" in shown.stdout
        assert "telegram:ops: ambiguous (1 attempt)" in shown.stdout


def test_sigkill_while_the_card_is_edited_edits_it_again_and_loses_nothing(home: Path) -> None:
    with notification_chat(home) as fake:
        run = notify(home, "--progress", "Working")
        poll_once(home)
        notify(home, "--run", run, "--progress", "Working harder")
        notify(home, "--run", run, "--final", "Done")
        killed = kill_poll_during(home, fake, "editMessageText", 1)
        assert expire_poller_leases(killed) >= 1
        fake.release()
        poll_once(home)
        # The interrupted edit is harmless to repeat: done again; the result goes out once.
        assert [s for s, _ in notify_effects(run)] == ["applied", "applied", "applied"]
        assert texts_starting(fake, "Finished") == 1
        assert texts_starting(fake, "In progress") == 1


def test_a_refused_result_is_an_alert_and_is_not_sent_again(home: Path) -> None:
    with notification_chat(home) as fake:
        run = notify(home, "--final", "Nightly report ready")
        fake.inject("sendMessage", Fault.error(BotError.BLOCKED.error_code,
                                               BotError.BLOCKED.description))
        stderr = poll_once(home, code=78)
        assert f"the final notification 0 of run {run} was refused for chat {USER}" in stderr
        poll_once(home, code=78)
        assert len(fake.requests("sendMessage")) == 1
        assert [s for s, _ in notify_effects(run)] == ["rejected"]
        assert run_cli(home, "status").returncode == 78


def test_a_notification_goes_out_during_a_running_poll_window(home: Path) -> None:
    with notification_chat(home) as fake:
        poller = start_cli(home, "poll", "--for", "30")
        try:
            listening = wait_in_flight(fake, "getUpdates", 1)
            assert int(listening.params["timeout"]) > 0  # the long poll is under way
            run = notify(home, "--final", "Backup finished")
            wait_until(lambda: any(r.params.get("text", "").startswith("Finished")
                                   for r in fake.requests("sendMessage")),
                       "the result to go out during the long poll")
            assert fake.requests("getUpdates")[0].ended_at is None  # it did not wait for it
            poller.terminate()
            finish(poller)
        finally:
            reap(poller)
        assert [s for s, _ in notify_effects(run)] == ["applied"]
