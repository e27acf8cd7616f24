"""Setup without traps (issue 18, item 3): chat changes seen as updates are alerts at once (78,
with the new chat id and the config change), before a send to that chat fails. Real `poll`
children against the loopback fake Bot API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.telegram.fake import FakeBotApi
from tests.channels.telegram.helpers import (
    FIXTURES,
    PROFILE,
    TOKEN,
    USER,
    config_dir,
    configure_telegram_profile,
    inbox_results,
)
from tests.cli import piw

GROUP, SUPERGROUP = -4012345678, -1001987654321  # the recorded migration's ids


@pytest.fixture
def fake(home: Path) -> Iterator[FakeBotApi]:
    with FakeBotApi(token=TOKEN) as server:
        configure_telegram_profile(home, server.base_url, chat_ids=(USER, GROUP))
        yield server


def test_a_migration_seen_as_an_update_is_78_at_once_with_the_change(
    home: Path, fake: FakeBotApi,
) -> None:
    [update_id] = fake.push_fixture(str(FIXTURES / "message_migrate_to_chat.json"))
    done = piw(home, "poll", "--once")
    assert done.returncode == 78, done.stderr
    [line] = done.stderr.splitlines()
    assert line == (f"Error: telegram:{PROFILE}: group {GROUP} became supergroup {SUPERGROUP};"
                    f" replace {GROUP} with {SUPERGROUP} in telegramProfiles.{PROFILE}"
                    f".allowedChatIds in {config_dir(home)}/channels.json, then run:"
                    f" piw-channels resend --all-failed --profile {PROFILE}")
    assert (update_id, "other", "ignored:chat_migrated") in inbox_results()


def test_the_bot_blocked_in_an_allowlisted_chat_is_78_at_once(
    home: Path, fake: FakeBotApi,
) -> None:
    fake.push_fixture(str(FIXTURES / "my_chat_member_blocked.json"))
    done = piw(home, "poll", "--once")
    assert done.returncode == 78, done.stderr
    [line] = done.stderr.splitlines()
    assert f"the bot was removed from (or blocked in) chat {USER}" in line
