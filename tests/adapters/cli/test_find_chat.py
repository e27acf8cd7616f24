"""`setup telegram --find-chat` (issue 18, item 3): wait for a message to the bot and print the
chat and user ids it came from, instead of opening `getUpdates` in a browser with the token in
the URL. A real `piw-channels` child process against the loopback fake Bot API, with the
message injected as an update while it waits."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.telegram.fake import FakeBotApi
from tests.channels.telegram.helpers import (
    CLI,
    FIXTURES,
    TOKEN,
    USER,
    config_dir,
    finish,
    reap,
    token_secret,
    wait_in_flight,
    write_token_file,
)
from tests.cli import piw
from tests.conftest import child_env
from tests.paths import ROOT

GROUP = FIXTURES / "message_forum_topic.json"


@pytest.fixture
def fake() -> Iterator[FakeBotApi]:
    with FakeBotApi(token=TOKEN) as server:
        yield server


def find_chat(home: Path, fake: FakeBotApi, *args: str) -> subprocess.Popen[str]:
    token_file = write_token_file(home)
    return subprocess.Popen(
        [*CLI, "setup", "telegram", "--find-chat", "60", "--token-file", str(token_file),
         "--api-base-url", fake.base_url, *args],
        cwd=ROOT, env=child_env(home), text=True, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)


def group_chat() -> tuple[int, int]:
    update = json.loads(GROUP.read_text())["result"][0]["message"]
    return int(update["chat"]["id"]), int(update["from"]["id"])


def test_find_chat_prints_the_chat_and_user_of_the_next_message(
    home: Path, fake: FakeBotApi,
) -> None:
    waiter = find_chat(home, fake)
    try:
        wait_in_flight(fake, "getUpdates")  # it waits in a long poll: nothing is queued yet
        [update_id] = fake.push_fixture(str(GROUP))
        code, out, err = finish(waiter)
    finally:
        reap(waiter)
    chat, user = group_chat()
    assert code == 0, err
    first, command = out.splitlines()
    assert first.startswith(f"Chat {chat} (supergroup: ") and f"from user {user} (" in first
    assert command.endswith(f"--user {user} --chat {chat} --api-base-url {fake.base_url}")
    assert err.startswith("Waiting up to 60 s for a message to @")
    assert token_secret() not in out + err
    # Nothing confirmed (no offset sent): the poller still gets the update; nothing installed.
    assert all(r.params.get("offset") in (None, "") for r in fake.requests("getUpdates"))
    assert [u["update_id"] for u in fake.pending_updates()] == [update_id]
    assert not (config_dir(home) / "channels.json").exists()


def test_find_chat_sees_a_message_already_queued_behind_other_updates(
    home: Path, fake: FakeBotApi,
) -> None:
    fake.push_fixture(str(FIXTURES / "callback_private.json"))  # a press: not a chat to find
    fake.push_fixture(str(FIXTURES / "message_plain_text.json"))
    waiter = find_chat(home, fake, "--json")
    code, out, err = finish(waiter)
    assert code == 0, err
    found = json.loads(out)
    assert [(c["chat_id"], c["user_id"], c["chat_type"]) for c in found["chats"]] == [
        (USER, USER, "private")]
    assert len(fake.pending_updates()) == 2


def test_find_chat_with_no_message_is_75_in_one_line(home: Path, fake: FakeBotApi) -> None:
    token_file = write_token_file(home)
    done = piw(home, "setup", "telegram", "--find-chat", "1", "--token-file", str(token_file),
               "--api-base-url", fake.base_url)
    assert (done.returncode, done.stdout) == (75, ""), done
    assert done.stderr.splitlines()[-1].startswith("Error: no message reached @")


def test_find_chat_takes_no_ids(home: Path) -> None:
    done = piw(home, "setup", "telegram", "--find-chat", "--token-file",
               str(write_token_file(home)), "--chat", "1")
    assert (done.returncode, done.stderr) == (2, "Error: --find-chat takes no --chat\n")
