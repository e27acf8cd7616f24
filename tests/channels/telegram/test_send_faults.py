"""What a failed sendMessage proves (issue 12, F6), through real `poll` processes.

A 401 proves nothing was sent: every delivery made while the token is revoked goes out by
itself once the token works (no `resend`). A 5xx may come after the message went out: the part
is ambiguous, shown by `status`, and never sent again blindly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapters.telegram.fake import FakeBotApi, Fault
from tests.channels.telegram.helpers import (
    TOKEN,
    attempt_outcomes,
    configure_telegram_profile,
    delivery_texts,
    effect_statuses,
    message_parts,
    message_statuses,
    open_decision_now,
    run_cli,
    send_count,
    write_token_file,
)

REVOKED = "7123456789:AAG-revokedSecret_Vn5Qw2Lp8Zx4Rt6Yb1Kc"
DELIVER = "telegram.deliver"


@dataclass
class Bot:
    home: Path
    fake: FakeBotApi

    def poll(self) -> int:
        return run_cli(self.home, "poll", "--once").returncode


@pytest.fixture
def bot(home: Path) -> Iterator[Bot]:
    with FakeBotApi(TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        yield Bot(home, fake)


def test_deliveries_made_while_the_token_is_revoked_go_out_by_themselves_once_it_works(
    bot: Bot,
) -> None:
    write_token_file(bot.home, REVOKED)  # the fake now answers 401 to everything
    first, second = open_decision_now(title="One?"), open_decision_now(title="Two?")
    for _ in range(2):
        assert bot.poll() == 78
    for handle in (first, second):
        assert effect_statuses(handle.decision_id, DELIVER) == ["pending"]  # not failed
        assert message_parts(handle.decision_id) == []  # no intent left: provably unsent
    # The pass's getUpdates comes first (deliveries wait until its presses are answered):
    # its 401 stops the pass before any send is tried.
    assert [r.token_ok for r in bot.fake.requests("getUpdates")] == [False, False]
    assert [r for r in bot.fake.requests("sendMessage") if not r.token_ok] == []

    write_token_file(bot.home, TOKEN)
    assert bot.poll() == 0
    for handle in (first, second):
        [text] = delivery_texts(handle)
        assert [r.status for r in bot.fake.requests("sendMessage")
                if r.token_ok and r.params.get("text") == text] == [200]
        assert effect_statuses(handle.decision_id, DELIVER) == ["applied"]
        assert all(p.message_ref is not None for p in message_parts(handle.decision_id))
    assert bot.poll() == 0
    assert len([r for r in bot.fake.requests("sendMessage") if r.token_ok]) == 2  # once each


def test_a_401_on_one_send_is_sent_again_as_soon_as_a_getupdates_proves_the_token_works(
    bot: Bot,
) -> None:
    handle = open_decision_now()
    [text] = delivery_texts(handle)
    bot.fake.inject("sendMessage", Fault.error(401, "Unauthorized"))
    assert bot.poll() == 0
    assert effect_statuses(handle.decision_id, DELIVER) == ["pending"]  # due again at once
    assert bot.poll() == 0  # its getUpdates proves the token works: the send goes again
    assert [r.method for r in bot.fake.requests() if r.method != "getMe"] == [
        "getUpdates", "sendMessage", "getUpdates", "sendMessage"]
    assert [r.status for r in bot.fake.requests("sendMessage")] == [401, 200]
    assert effect_statuses(handle.decision_id, DELIVER) == ["applied"]
    assert attempt_outcomes(handle.decision_id, DELIVER) == ["rejected", "applied"]
    assert send_count(bot.fake, text) == 2
    assert bot.poll() == 0
    assert send_count(bot.fake, text) == 2


@pytest.mark.parametrize("status", [500, 502])
def test_a_5xx_on_send_message_is_ambiguous_shown_and_never_resent(bot: Bot, status: int) -> None:
    handle = open_decision_now()
    [text] = delivery_texts(handle)
    bot.fake.inject("sendMessage", Fault.error(status, "Internal Server Error"))
    first = run_cli(bot.home, "poll", "--once")
    assert first.returncode == 75 and "may not have arrived" in first.stderr  # reported
    for _ in range(2):
        assert bot.poll() == 75  # still needs a person; the hourly repeat keeps it quiet
    assert send_count(bot.fake, text) == 1
    assert effect_statuses(handle.decision_id, DELIVER) == ["ambiguous"]
    assert message_statuses(handle.decision_id) == ["ambiguous"]
    [part] = message_parts(handle.decision_id)
    assert part.message_ref is None  # the intent stays: it may have arrived
    status_out = run_cli(bot.home, "status", "--json").stdout
    assert '"ambiguous": 1' in status_out, status_out
