"""`poll` tells cron what needs a person: one stderr line per condition, the README's exit
codes, no mail storm (reported when it starts, at most hourly while it lasts, once more when it
clears). Real `poll` child processes against the loopback fake Bot API; the hour passes
through the child's shifted clock (`tests/shifted_clock.py`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapters.telegram.client import TelegramClient
from adapters.telegram.fake import BotError, FakeBotApi, Fault
from channels.config.install import install_telegram_profile
from channels.decisions import views
from state.database import Database
from tests.channels.telegram.helpers import (
    PROFILE,
    TOKEN,
    USER,
    config_dir,
    configure_telegram_profile,
    open_decision_now,
    write_token_file,
)
from tests.cli import piw

MINUTE = 60_000
WHO = f"telegram:{PROFILE}"
CHECK = f"piw-channels poll --once -v --profile {PROFILE}"


@dataclass(frozen=True)
class Run:
    code: int
    lines: list[str]


@pytest.fixture
def fake(home: Path) -> Iterator[FakeBotApi]:
    with FakeBotApi(token=TOKEN) as server:
        configure_telegram_profile(home, server.base_url)
        yield server


def poll(home: Path, *args: str, minutes: float = 0) -> Run:
    """`piw-channels poll --once ARGS` with the child's clock `minutes` ahead."""
    return cli(home, "poll", "--once", *args, minutes=minutes)


def cli(home: Path, *args: str, minutes: float = 0) -> Run:
    done = piw(home, *args, minutes=minutes)
    assert done.stdout == "" or args[0] in ("resend", "status", "init"), done.stdout
    return Run(done.returncode, (done.stdout + done.stderr).splitlines())


def fingerprint(decision_id: str) -> str:
    with Database.open_reader() as db:
        return views.fingerprint_of(db.conn, decision_id)


def test_an_unreachable_bot_api_is_reported_after_alert_after_then_hourly_then_recovered(
    home: Path, fake: FakeBotApi, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each refused pass retries with pauses of 0.5 s and 1 s (the client's own tests hold
    # them); here only what the operator reads matters, so the passes run them at once.
    monkeypatch.setitem(TelegramClient.__init__.__kwdefaults__, "backoff", lambda attempt: 0.0)
    assert poll(home) == Run(0, [])  # the last successful getUpdates, at minute 0
    start = time.monotonic()  # just after it (so a child at `at(11)` is 11 min past it)

    def at(minute: float) -> float:
        """The offset that puts a child at `minute` after the first poll, however long the
        test has taken so far (a loaded machine must not turn 71 min into 72)."""
        return minute - (time.monotonic() - start) / 60

    fake.refuse_connections()
    assert poll(home, minutes=at(5)) == Run(0, [])  # down, but not for 10 minutes yet
    down = Run(75, [f"Error: {WHO}: no successful getUpdates for 11 min (not sent:"
                    " httpx.ConnectError: All connection attempts failed); check this machine's network and DNS and the"
                    f" Bot API, then run: {CHECK}"])
    assert poll(home, minutes=at(11)) == down
    assert poll(home, minutes=at(12)) == Run(75, [])  # still down: quiet within the hour
    assert poll(home, minutes=at(70)) == Run(75, [])
    assert poll(home, minutes=at(71.5)) == Run(75, [down.lines[0].replace("11 min", "71 min")])
    assert poll(home, minutes=at(72)) == Run(75, [])
    fake.accept_connections()
    assert poll(home, minutes=at(73)) == Run(0, [
        f"Recovered: {WHO}: the Bot API is reachable again (after 73 min without getUpdates)"])
    assert poll(home, minutes=at(74)) == Run(0, [])  # said once


def test_a_failing_bot_api_is_reported_at_once_with_alert_after_0(
    home: Path, fake: FakeBotApi,
) -> None:
    fake.inject("getUpdates", Fault.error(502, "Bad Gateway"))
    failed = poll(home, "--alert-after", "0")
    assert failed.code == 75 and len(failed.lines) == 1
    assert re.fullmatch(
        rf"Error: {WHO}: no successful getUpdates for \d+ s \(HTTP 502: Bad Gateway\); check"
        rf" this machine's network and DNS and the Bot API, then run: {re.escape(CHECK)}",
        failed.lines[0])
    fake.inject("getUpdates", Fault.drop())  # the request left, no answer came: a timeout
    still = poll(home, "--alert-after", "0", "-v")
    assert still.code == 75
    assert still.lines[0].startswith(f"Still: {WHO}: no successful getUpdates for ")
    recovered = poll(home, "--alert-after", "0")
    assert recovered.code == 0 and len(recovered.lines) == 1
    assert re.fullmatch(rf"Recovered: {WHO}: the Bot API is reachable again \(after \d+ s"
                        r" without getUpdates\)", recovered.lines[0])


def test_a_rejected_token_exits_78_once_an_hour_until_it_is_fixed(
    home: Path, fake: FakeBotApi,
) -> None:
    rejected = Run(78, [
        f"Error: {WHO}: the Bot API rejected the token (HTTP 401); put the bot's current token"
        f" in {home / 'telegram.token'}, or run: piw-channels setup telegram --profile {PROFILE}"
        " --token-file FILE --user ID --chat ID"])
    write_token_file(home, "7999999999:AAF-aRevokedTokenRevokedToken_xyz")
    assert poll(home) == rejected
    assert poll(home, minutes=1) == Run(78, [])
    assert poll(home, minutes=61) == rejected
    write_token_file(home, TOKEN)
    assert poll(home, minutes=62) == Run(0, [f"Recovered: {WHO}: the Bot API accepts the"
                                             " token again"])


def test_a_conflict_and_a_webhook_exit_75_with_their_fix(home: Path, fake: FakeBotApi) -> None:
    fake.inject("getUpdates", Fault.canned(BotError.CONFLICT))
    assert poll(home) == Run(75, [
        f"Error: {WHO}: another getUpdates poller is using this bot token; run only one poller"
        f" per bot: stop the other one, then run: {CHECK}"])
    fake.inject("getUpdates", Fault.canned(BotError.WEBHOOK_CONFLICT))
    assert poll(home) == Run(75, [
        f"Error: {WHO}: a webhook is active for this bot, and Telegram refuses to be polled"
        " while one is set; delete it (the updates waiting are kept), run: piw-channels setup"
        f" telegram --profile {PROFILE} --token-file FILE --user ID --chat ID"
        " --delete-webhook"])  # a new cause: said
    assert poll(home) == Run(0, [f"Recovered: {WHO}: getUpdates works again (no conflict any"
                                 " more)"])


def test_a_blocked_recipient_names_the_decision_and_the_resend(
    home: Path, fake: FakeBotApi,
) -> None:
    handle = open_decision_now()
    fp = fingerprint(handle.decision_id)
    fake.inject("sendMessage", Fault.canned(BotError.BLOCKED))
    resend = f"piw-channels resend {handle.decision_id} --profile {PROFILE}"
    blocked = (f"Error: {WHO}: Decision {fp} was refused for chat {USER} (HTTP 403: Forbidden:"
               " bot was blocked by the user); unblock the bot or start it in that chat (or"
               f" remove the chat from telegramProfiles.{PROFILE}.allowedChatIds in"
               f" {config_dir(home)}/channels.json), then run: {resend}")
    assert poll(home) == Run(78, [blocked])
    assert poll(home, minutes=30) == Run(78, [])
    # The person unblocked the bot and runs the printed command.
    assert cli(home, *resend.split()[1:]) == Run(0, [
        f"resend of {handle.decision_id} on {WHO} reserved",
        f"Recovered: {WHO}: Decision {fp} no longer needs attention (was: chat {USER} refused"
        " it)"])
    assert poll(home) == Run(0, [])


def test_a_migrated_group_prints_the_new_chat_id_and_the_config_change(home: Path) -> None:
    group, supergroup = -4001234567, -1004001234567
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url, chat_ids=[group])
        handle = open_decision_now()
        fp = fingerprint(handle.decision_id)
        fake.inject("sendMessage", Fault.migrated(supergroup))
        resend = f"piw-channels resend {handle.decision_id} --profile {PROFILE}"
        assert poll(home) == Run(78, [
            f"Error: {WHO}: Decision {fp}: group {group} became supergroup {supergroup};"
            f" replace {group} with {supergroup} in telegramProfiles.{PROFILE}.allowedChatIds"
            f" in {config_dir(home)}/channels.json, then run: {resend}"])
        install_telegram_profile(config_dir(home), token_file=home / "telegram.token",
                                 user_ids=[str(USER)], chat_ids=[str(supergroup)],
                                 profile=PROFILE, api_base_url=fake.base_url)
        assert cli(home, *resend.split()[1:]).lines == [
            f"resend of {handle.decision_id} on {WHO} reserved",
            f"Recovered: {WHO}: Decision {fp} no longer needs attention (was: chat {group}"
            " migrated)"]
        sent = [r.params.get("chat_id") for r in fake.requests("sendMessage")]
        assert sent == [str(group), str(supergroup)]


def test_resend_all_failed_resends_every_refused_delivery_of_the_profile(
    home: Path, fake: FakeBotApi,
) -> None:
    first, second = open_decision_now(title="Plan one?"), open_decision_now(title="Plan two?")
    fake.inject("sendMessage", Fault.canned(BotError.BLOCKED, times=2))
    assert poll(home).code == 78
    assert cli(home, "resend", "--profile", PROFILE) == Run(2, [
        "Error: give a DECISION_ID or --all-failed (not both)"])
    done = piw(home, "resend", "--all-failed", "--profile", PROFILE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"resend of {first.decision_id} on {WHO} reserved",
        f"resend of {second.decision_id} on {WHO} reserved"]
    assert sorted(line.split(" no longer")[0] for line in done.stderr.splitlines()) == sorted(
        f"Recovered: {WHO}: Decision {fingerprint(h.decision_id)}" for h in (first, second))
    again = piw(home, "resend", "--all-failed", "--profile", PROFILE)
    assert (again.returncode, again.stdout, again.stderr) == (
        0, f"no failed delivery on {WHO}\n", "")


def test_a_bug_in_the_alert_state_is_reported_and_never_keeps_the_lease(
    home: Path, fake: FakeBotApi,
) -> None:
    from channels import store
    from state import resources
    from state.resources import Actor
    from tests.channels.telegram.helpers import channel_id_of, live_lease_owners

    assert poll(home) == Run(0, [])
    resource = store.channel_resource(channel_id_of())
    with Database.open_writer() as db:  # a pass state this version cannot read
        db.write(lambda c: resources.bump_current(
            c, resource, "channel.lease_released", Actor("channel", "test"),
            db.clock.now_ms(), payload={"getUpdates": "ok", "alerts": {"x": {"kind": "token"}}}))
    assert poll(home) == Run(1, [f"Error: {WHO}: alerts: KeyError: 'since'"])
    assert live_lease_owners() == []  # released all the same
    assert poll(home) == Run(0, [])  # and the next pass starts afresh


def test_a_config_error_is_said_on_every_pass_and_recovered_once_it_is_fixed(
    home: Path, fake: FakeBotApi,
) -> None:
    start = time.monotonic()

    def at(minute: float) -> float:  # as in the test above: minutes after the first poll
        return minute - (time.monotonic() - start) / 60

    assert poll(home) == Run(0, [])
    channels = config_dir(home) / "channels.json"
    channels.chmod(0o644)
    for minutes in (1, 2):  # every pass stops on it, so every pass says it
        broken = poll(home, minutes=at(minutes))
        assert broken.code == 77 and len(broken.lines) == 1, broken
        assert broken.lines[0].startswith("Error: ") and "chmod 600" in broken.lines[0]
    channels.chmod(0o600)
    fixed = poll(home, minutes=at(3.5))
    assert fixed.code == 0, fixed
    [line] = fixed.lines
    assert line.startswith("Recovered: the configuration can be read again (after 2 min;"
                           " was: "), line
    assert poll(home, minutes=at(4)) == Run(0, [])  # said once
