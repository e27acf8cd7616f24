"""Crash tests: a real `piw-channels poll` process is SIGKILLed at chosen points.

The fake Bot API runs in its own process, so it outlives the poller and keeps the record of
every request. After each kill the test lets the dead poller's leases expire (raw SQL: the
lease TTL is 60 s), releases what the fake was holding, runs `poll --once` again and checks the
database and the request log: no update lost or processed twice, no confirmed or possibly-sent
part sent again, exactly one resolution per answered decision.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from adapters.telegram.fake import Fault, RemoteFakeBotApi
from adapters.telegram.fake.constants import CALLBACK_ID_BASE
from channels.decisions.workflows import AskHandle
from tests.channels.telegram.helpers import (
    PROFILE,
    USER,
    InboxState,
    PartState,
    attempt_outcomes,
    button_data,
    configure_telegram_profile,
    cursor_value,
    delivery_texts,
    effect_statuses,
    expire_poller_leases,
    inbox_results,
    inbox_states,
    kill_hard,
    live_lease_owners,
    message_parts,
    message_statuses,
    open_decision_now,
    out_of_process_fake,
    press_button,
    prompt_message,
    push_plain_message,
    reap,
    reply_to_prompt,
    resolutions,
    run_cli,
    send_count,
    start_cli,
    submissions_of_update,
    wait_in_flight,
    wait_until,
    write_token_file,
)

DELIVER, PROMPT, SETTLE = "telegram.deliver", "telegram.prompt", "telegram.settle"


def _poll_once(home: Path, code: int = 0) -> list[str]:
    """One `poll --once -v`; returns its stderr lines other than the per-channel summary."""
    result = run_cli(home, "poll", "--once", "-v")
    assert result.returncode == code, result.stderr
    assert result.stdout == ""
    return [line for line in result.stderr.splitlines() if not line.startswith("telegram:")]
    assert ": polled:" in result.stderr, result.stderr


def _last_part_ref(decision_id: str) -> int:
    parts = message_parts(decision_id)
    assert parts and parts[-1].message_ref is not None, parts
    return int(parts[-1].message_ref)


def _answered_callbacks(fake: RemoteFakeBotApi) -> Counter[str]:
    return Counter(str(r.params.get("callback_query_id"))
                   for r in fake.requests("answerCallbackQuery"))


def _callback_id(update_id: int) -> str:
    # push_fixture derives the callback query id from the update id.
    return str(CALLBACK_ID_BASE + update_id)


def test_sigkill_during_the_long_poll_loses_no_update_and_the_next_poll_resumes_at_the_cursor(
    home: Path,
) -> None:
    token_file = write_token_file(home)
    with out_of_process_fake(token_file) as server:
        fake = server.control
        configure_telegram_profile(home, server.base_url)
        handle = open_decision_now()
        [text] = delivery_texts(handle)
        plain = push_plain_message(fake)
        poller = start_cli(home, "poll", "--for", "60")
        try:
            # The 1st getUpdates returns the plain message at once; the 2nd is the long poll,
            # sent only after the batch and the cursor were committed.
            long_poll = wait_in_flight(fake, "getUpdates", 2)
            assert long_poll.params["offset"] == str(plain + 1)
            assert int(long_poll.params["timeout"]) > 0
            # The delivery goes out beside the long poll: let it be confirmed first.
            wait_until(lambda: bool(message_parts(handle.decision_id))
                       and message_parts(handle.decision_id)[-1].message_ref is not None,
                       "the delivery to be confirmed")
            assert fake.requests("getUpdates")[1].ended_at is None, "the long poll ended"
            kill_hard(poller)
        finally:
            reap(poller)
        assert cursor_value() == plain + 1
        assert inbox_results() == [(plain, "other", "ignored:plain_message")]
        press = press_button(fake, handle, "continue", _last_part_ref(handle.decision_id))

        assert [s.update_id for s in inbox_states()] == [plain]
        # (The next poll would take the dead poller's lease over at once:
        # tests/adapters/cli/test_poller_faults.py; here its leases expire as after a reboot.)
        assert expire_poller_leases(poller.pid) >= 1
        _poll_once(home)

        recovery = fake.requests("getUpdates")[-1]
        assert recovery.params["offset"] == str(plain + 1)  # resumed at the stored cursor
        assert inbox_results() == [(plain, "other", "ignored:plain_message"),
                                   (press, "callback", "won")]
        assert submissions_of_update(press) == [(handle.decision_id, "won")]
        assert resolutions(handle.decision_id) == [("accepted", "human", str(press))]
        assert send_count(fake, text) == 1  # the delivery was never repeated
        assert _answered_callbacks(fake) == Counter({_callback_id(press): 1})
        assert effect_statuses(handle.decision_id, DELIVER) == ["applied"]
        assert effect_statuses(handle.decision_id, SETTLE) == ["applied"]
        assert live_lease_owners() == []


def test_sigkill_before_the_ingest_commit_fetches_the_batch_again_and_processes_it_once(
    home: Path,
) -> None:
    token_file = write_token_file(home)
    with out_of_process_fake(token_file) as server:
        fake = server.control
        configure_telegram_profile(home, server.base_url)
        handle = open_decision_now()
        _poll_once(home)  # delivered
        press = press_button(fake, handle, "continue", _last_part_ref(handle.decision_id))
        offset = cursor_value()
        fake.inject("getUpdates", Fault.hang())  # the batch is on its way, not yet answered
        poller = start_cli(home, "poll", "--for", "60")
        try:
            wait_in_flight(fake, "getUpdates", len(fake.requests("getUpdates")) + 1)
            kill_hard(poller)
        finally:
            reap(poller)
        fake.release()  # the held batch goes to a dead connection: never confirmed
        wait_until(lambda: all(r.ended_at is not None for r in fake.requests("getUpdates")),
                   "the held getUpdates to finish")
        assert inbox_results() == [] and cursor_value() == offset

        assert expire_poller_leases(poller.pid) >= 1
        _poll_once(home)

        refetch = fake.requests("getUpdates")[-1]
        assert refetch.params.get("offset") == (None if offset is None else str(offset))
        assert inbox_results() == [(press, "callback", "won")]
        assert cursor_value() == press + 1
        assert submissions_of_update(press) == [(handle.decision_id, "won")]
        assert resolutions(handle.decision_id) == [("accepted", "human", str(press))]
        assert _answered_callbacks(fake) == Counter({_callback_id(press): 1})
        assert live_lease_owners() == []


def test_sigkill_after_the_ingest_commit_processes_each_update_exactly_once(home: Path) -> None:
    token_file = write_token_file(home)
    with out_of_process_fake(token_file) as server:
        fake = server.control
        configure_telegram_profile(home, server.base_url)
        first = open_decision_now(title="Approve plan one?")
        second = open_decision_now(title="Approve plan two?")
        _poll_once(home)  # delivers both
        prompted = press_button(fake, first, "replan", _last_part_ref(first.decision_id))
        pressed = press_button(fake, second, "continue", _last_part_ref(second.decision_id))
        fake.inject("answerCallbackQuery", Fault.hang(times=2))
        poller = start_cli(home, "poll", "--for", "60")
        try:
            # The answers go out together once the batch's rows are committed (one
            # transaction); the ingest (both presses, and the cursor) was committed before.
            wait_in_flight(fake, "answerCallbackQuery", 1)
            wait_in_flight(fake, "answerCallbackQuery", 2)
            kill_hard(poller)
        finally:
            reap(poller)
        assert cursor_value() == pressed + 1
        assert inbox_states() == [
            InboxState(prompted, "callback", True, {"result": "prompted", "choice": "replan"}),
            InboxState(pressed, "callback", True,
                       {"result": "won", "message": "accepted", "outcome": "accepted"}),
        ]  # both processed in the batch's one commit, both answers in flight
        assert effect_statuses(first.decision_id, PROMPT) == ["pending"]
        fake.release()

        assert expire_poller_leases(poller.pid) >= 1
        _poll_once(home)

        states = inbox_states()
        assert inbox_results() == [(prompted, "callback", "prompted"),
                                   (pressed, "callback", "won")]
        assert states[0].result == {"result": "prompted", "choice": "replan"}  # not redone
        assert states[1].result["outcome"] == "accepted"
        assert submissions_of_update(prompted) == []
        assert submissions_of_update(pressed) == [(second.decision_id, "won")]
        assert resolutions(second.decision_id) == [("accepted", "human", str(pressed))]
        assert resolutions(first.decision_id) == []
        # Each press was answered exactly once, by the dead poller's held answers: its rows
        # are processed, never processed or answered again.
        assert _answered_callbacks(fake) == Counter({_callback_id(prompted): 1,
                                                     _callback_id(pressed): 1})
        assert effect_statuses(first.decision_id, PROMPT) == ["applied"]
        found = prompt_message(first.decision_id)
        assert found is not None
        prompt_ref, prompt_text = found
        assert send_count(fake, prompt_text) == 1

        reply = reply_to_prompt(fake, prompt_ref, prompt_text, "Do modules 1-10 first.")
        _poll_once(home)
        assert inbox_results()[-1] == (reply, "reply", "won")
        assert submissions_of_update(reply) == [(first.decision_id, "won")]
        assert resolutions(first.decision_id) == [("accepted", "human", str(reply))]
        for handle in (first, second):
            assert send_count(fake, delivery_texts(handle)[0]) == 1
        assert live_lease_owners() == []


def _kill_while_a_send_is_held(home: Path, fake: RemoteFakeBotApi, *, parts: int
                               ) -> tuple[AskHandle, int]:
    """Open a decision of `parts` parts, let all but the last part go through, hold the last
    one's sendMessage in the fake and SIGKILL the poller; then let the held send complete
    (the message did reach the chat). Returns the decision and the dead poller's pid."""
    handle = open_decision_now(parts=parts)
    for _ in range(parts - 1):
        fake.inject("sendMessage", Fault.delay(0.0))  # goes through
    fake.inject("sendMessage", Fault.hang())
    poller = start_cli(home, "poll", "--for", "60")
    try:
        wait_in_flight(fake, "sendMessage", parts)
        kill_hard(poller)
    finally:
        reap(poller)
    assert effect_statuses(handle.decision_id, DELIVER) == ["applying"]
    assert message_parts(handle.decision_id)[-1] == PartState(0, parts - 1, None, None)
    fake.release()
    wait_until(lambda: all(r.ended_at is not None for r in fake.requests("sendMessage")),
               "the held sendMessage to finish")
    return handle, poller.pid


def test_sigkill_while_the_server_holds_a_send_leaves_an_ambiguous_delivery_never_resent(
    home: Path,
) -> None:
    token_file = write_token_file(home)
    with out_of_process_fake(token_file) as server:
        fake = server.control
        configure_telegram_profile(home, server.base_url)
        handle, pid = _kill_while_a_send_is_held(home, fake, parts=1)
        [text] = delivery_texts(handle)
        assert message_parts(handle.decision_id) == [PartState(0, 0, None, None)]  # the intent

        assert expire_poller_leases(pid) >= 2  # the channel and the delivery effect
        fp = handle.request.presentation_digest[7:19]
        alert = (f"telegram:{PROFILE}: Decision {fp} may not have arrived in chat {USER} (a"
                 " send's outcome is unknown); check that chat, and if a part is missing run:"
                 " piw-channels resend"
                 f" {handle.decision_id} --profile {PROFILE}")
        assert _poll_once(home, 75) == [f"Error: {alert}"]  # cron hears of it

        assert effect_statuses(handle.decision_id, DELIVER) == ["ambiguous"]
        assert attempt_outcomes(handle.decision_id, DELIVER) == ["interrupted"]
        assert message_parts(handle.decision_id) == [PartState(0, 0, None, None)]
        assert send_count(fake, text) == 1  # maybe sent: never sent again by the worker
        assert _poll_once(home, 75) == [f"Still: {alert}"]  # nor by a later poll (-v repeats)
        assert send_count(fake, text) == 1

        # The person saw the message that did arrive (message 1 in the chat) and presses its
        # button: the press resolves the decision and proves (reconciles) the part.
        press = press_button(fake, handle, "stop", 1, message_text=text)
        assert _poll_once(home) == [
            f"Recovered: telegram:{PROFILE}: Decision {fp} no longer needs attention"
            " (was: an ambiguous delivery)"]
        assert resolutions(handle.decision_id) == [("accepted", "human", str(press))]
        assert message_parts(handle.decision_id) == [PartState(0, 0, str(USER), "1")]
        assert send_count(fake, text) == 1
        assert inbox_results() == [(press, "callback", "won")]
        assert live_lease_owners() == []


def test_sigkill_between_two_parts_keeps_the_first_part_sent_once_and_the_second_ambiguous(
    home: Path,
) -> None:
    token_file = write_token_file(home)
    with out_of_process_fake(token_file) as server:
        fake = server.control
        configure_telegram_profile(home, server.base_url)
        handle, pid = _kill_while_a_send_is_held(home, fake, parts=2)
        first_text, second_text = delivery_texts(handle)
        assert message_parts(handle.decision_id) == [
            PartState(0, 0, str(USER), "1"), PartState(0, 1, None, None)]

        assert expire_poller_leases(pid) >= 2
        _poll_once(home, 75)

        assert effect_statuses(handle.decision_id, DELIVER) == ["ambiguous"]
        assert attempt_outcomes(handle.decision_id, DELIVER) == ["interrupted"]
        assert message_parts(handle.decision_id) == [
            PartState(0, 0, str(USER), "1"), PartState(0, 1, None, None)]
        assert (send_count(fake, first_text), send_count(fake, second_text)) == (1, 1)
        assert [r.params.get("reply_markup") is not None
                for r in fake.requests("sendMessage")] == [False, True]  # keyboard on the last
        _poll_once(home, 75)  # a later poll changes nothing
        assert (send_count(fake, first_text), send_count(fake, second_text)) == (1, 1)
        assert effect_statuses(handle.decision_id, DELIVER) == ["ambiguous"]

        # Only the operator's explicit resend sends the maybe-sent part again, never the
        # confirmed one.
        resend = run_cli(home, "resend", handle.decision_id, "--profile", PROFILE)
        assert resend.returncode == 0, resend.stderr
        assert (send_count(fake, first_text), send_count(fake, second_text)) == (1, 2)
        assert effect_statuses(handle.decision_id, DELIVER) == ["ambiguous", "applied"]
        assert [p.message_ref is not None for p in message_parts(handle.decision_id)] == [
            True, True]
        assert fake.requests("sendMessage")[-1].params["reply_markup"] == {
            "inline_keyboard": [[{"text": label, "callback_data": button_data(handle, choice)}]
                                for choice, label in (("continue", "Continue"), ("stop", "Stop"),
                                                      ("replan", "Replan"))]}
        assert live_lease_owners() == []


def test_a_delivery_left_ambiguous_by_a_crash_is_ambiguous_on_every_surface(home: Path) -> None:
    """The recovery marks the effect ambiguous; the message row, and so `status`, must say
    the same (as they do when a send times out without a crash), not `pending`."""
    token_file = write_token_file(home)
    with out_of_process_fake(token_file) as server:
        fake = server.control
        configure_telegram_profile(home, server.base_url)
        handle, pid = _kill_while_a_send_is_held(home, fake, parts=2)
        assert expire_poller_leases(pid) >= 2
        _poll_once(home, 75)
        assert effect_statuses(handle.decision_id, DELIVER) == ["ambiguous"]
        report = json.loads(run_cli(home, "status", "--json").stdout)
        assert (message_statuses(handle.decision_id),
                report["channels"][0]["deliveries"]) == (["ambiguous"], {"ambiguous": 1})


def test_a_reply_to_a_prompt_left_ambiguous_by_a_crash_still_answers_the_decision(
    home: Path,
) -> None:
    """The ForceReply prompt was held by the server when the poller died, then arrived. It
    is never sent again (ambiguous), so a reply to it is the only way to answer with text:
    the reply proves the prompt arrived (as a press proves its delivery) and must bind."""
    token_file = write_token_file(home)
    with out_of_process_fake(token_file) as server:
        fake = server.control
        configure_telegram_profile(home, server.base_url)
        handle = open_decision_now()
        _poll_once(home)  # delivered as message 1
        press_button(fake, handle, "replan", _last_part_ref(handle.decision_id))
        fake.inject("sendMessage", Fault.hang())  # the prompt
        poller = start_cli(home, "poll", "--for", "60")
        try:
            held = wait_in_flight(fake, "sendMessage", 2)
            kill_hard(poller)
        finally:
            reap(poller)
        prompt_text = str(held.params["text"])
        assert held.params["reply_markup"]["force_reply"] is True
        fake.release()  # the prompt reaches the chat as message 2
        wait_until(lambda: all(r.ended_at is not None for r in fake.requests("sendMessage")),
                   "the held prompt to finish")
        assert expire_poller_leases(poller.pid) >= 2
        _poll_once(home)
        assert effect_statuses(handle.decision_id, PROMPT) == ["ambiguous"]
        assert send_count(fake, prompt_text) == 1  # never sent again

        reply = reply_to_prompt(fake, 2, prompt_text, "Do modules 1-10 first.")
        _poll_once(home)
        assert send_count(fake, prompt_text) == 1
        assert inbox_results()[-1] == (reply, "reply", "won")
        assert resolutions(handle.decision_id) == [("accepted", "human", str(reply))]
