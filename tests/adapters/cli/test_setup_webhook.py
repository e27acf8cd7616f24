"""`setup telegram` through python-telegram-bot's `Bot` (issue 20 item 6): a webhook that would
block polling is deleted only when the operator asks for it (`--delete-webhook`, or yes at the
prompt on a terminal), never silently; the token reaches no log record, exception or output of
PTB's either. Real child processes and in-process runs against the loopback fake Bot API."""

from __future__ import annotations

import json
import logging
import os
import pty
import subprocess
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.telegram.fake import FakeBotApi, Fault
from adapters.telegram.setup_bot import SetupBot
from adapters.telegram.setup_steps import BotApiUnavailable, verify_token
from channels.config.errors import ConfigInvalid
from tests.adapters.cli.test_setup import (
    SECRET_PART,
    TOKEN,
    USER,
    Result,
    assert_nothing_written,
    assert_token_nowhere,
    cli,
    config_dir,
    invoke,
    setup_args,
    write_token,
)
from tests.cli import CLI, piw
from tests.conftest import child_env
from tests.paths import ROOT

HOOK = "https://hooks.example.org/piw-secret-path-0123/in"


@pytest.fixture
def fake() -> Iterator[FakeBotApi]:
    with FakeBotApi(TOKEN) as server:
        yield server


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    return write_token(tmp_path / "secrets" / "bot.token", TOKEN + "\n")


def methods(fake: FakeBotApi) -> list[str]:
    return [r.method for r in fake.requests()]


def on_a_terminal(home: Path, argv: list[str], answer: str) -> Result:
    """Run the CLI with a terminal as its stdin, typing `answer` at the prompt."""
    leader, follower = pty.openpty()
    try:
        child = subprocess.Popen([*CLI, *argv], cwd=ROOT, env=child_env(home), stdin=follower,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.write(leader, answer.encode() + b"\n")  # the terminal keeps the line until it is read
        out, err = child.communicate(timeout=60)
    finally:
        os.close(follower)
        os.close(leader)
    return Result(child.returncode, out, err)


# --- the webhook ------------------------------------------------------------------------------


def test_a_webhook_stops_setup_without_a_terminal_naming_the_flag(
    home: Path, fake: FakeBotApi, token_file: Path
) -> None:
    fake.set_webhook(HOOK)
    result = cli(home, setup_args(token_file, fake.base_url))
    assert (result.code, result.out) == (75, "")
    [line] = result.err.splitlines()
    assert line == (
        "Error: Telegram setup: this bot has a webhook (at https://hooks.example.org/...), and"
        " Telegram refuses to be polled while it is set: run setup again with --delete-webhook"
        " to delete it (the updates waiting are kept); nothing was written")
    assert "piw-secret-path" not in result.err  # a webhook's path may hold a secret
    assert methods(fake) == ["getMe", "getWebhookInfo"]
    assert fake.webhook_url == HOOK
    assert_nothing_written(home)


def test_delete_webhook_deletes_it_keeps_the_waiting_updates_and_says_so(
    home: Path, fake: FakeBotApi, token_file: Path
) -> None:
    fake.set_webhook(HOOK)
    fake.push_update({"message": {"chat": {"id": int(USER), "type": "private"}, "text": "hi"}})
    result = cli(home, setup_args(token_file, fake.base_url, "--delete-webhook"))
    assert result.code == 0, result.err
    assert methods(fake) == ["getMe", "getWebhookInfo", "deleteWebhook", "setMyCommands"]
    [deleted] = fake.requests("deleteWebhook")
    assert deleted.fields.get("drop_pending_updates") in (None, "false", "False")
    assert fake.webhook_url == ""
    assert len(fake.pending_updates()) == 1
    assert result.err == ("Deleted the bot's webhook (at https://hooks.example.org/...): it is"
                          " polled now.\n")
    assert (config_dir(home) / "channels.json").exists()
    assert_token_nowhere(result, home)
    polled = piw(home, "poll", "--once")
    assert (polled.returncode, polled.stderr) == (0, "")  # Telegram lets it poll now


def test_delete_webhook_without_a_webhook_deletes_nothing(
    home: Path, fake: FakeBotApi, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = invoke(capsys, setup_args(token_file, fake.base_url, "--delete-webhook", "--json"))
    assert result.code == 0, result.err
    assert methods(fake) == ["getMe", "getWebhookInfo", "setMyCommands"]
    summary = json.loads(result.out)
    assert (summary["webhook_deleted"], result.err) == (False, "")


@pytest.mark.parametrize(("answer", "deleted"), [("y", True), ("yes", True), ("n", False),
                                                 ("", False)])
def test_on_a_terminal_setup_asks_before_it_deletes_the_webhook(
    home: Path, fake: FakeBotApi, token_file: Path, answer: str, deleted: bool
) -> None:
    fake.set_webhook(HOOK)
    result = on_a_terminal(home, setup_args(token_file, fake.base_url), answer)
    assert result.err.startswith(
        "This bot has a webhook (at https://hooks.example.org/...): Telegram sends it every"
        " update, and refuses to be polled while it is set. Delete the webhook so that"
        " piw-channels can poll (the updates waiting are kept)? [y/N] ")
    if deleted:
        assert result.code == 0, result.err
        assert methods(fake) == ["getMe", "getWebhookInfo", "deleteWebhook", "setMyCommands"]
        assert fake.webhook_url == ""
    else:
        assert result.code == 75
        assert "run setup again with --delete-webhook" in result.err
        assert methods(fake) == ["getMe", "getWebhookInfo"]
        assert fake.webhook_url == HOOK
        assert_nothing_written(home)


def test_a_failing_delete_webhook_stops_setup_and_writes_nothing(
    home: Path, fake: FakeBotApi, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.set_webhook(HOOK)
    fake.inject("deleteWebhook", Fault.error(500, "Internal Server Error"))
    result = invoke(capsys, setup_args(token_file, fake.base_url, "--delete-webhook"))
    assert result.code == 75
    assert result.err == ("Error: Telegram deleteWebhook failed (Internal Server Error); the"
                          " webhook is still set; nothing was written\n")
    assert fake.webhook_url == HOOK
    assert_nothing_written(home)


def test_a_webhook_that_cannot_be_checked_is_a_note_not_a_failure(
    home: Path, fake: FakeBotApi, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.inject("getWebhookInfo", Fault.error(500, "Internal Server Error"))
    result = invoke(capsys, setup_args(token_file, fake.base_url))
    assert result.code == 0, result.err
    assert result.err == ("Note: whether the bot has a webhook could not be checked"
                          " (getWebhookInfo failed); `poll` says so if one is set.\n")
    assert (config_dir(home) / "channels.json").exists()


def test_find_chat_asks_for_the_flag_too(home: Path, fake: FakeBotApi, token_file: Path) -> None:
    fake.set_webhook(HOOK)
    result = cli(home, ["setup", "telegram", "--find-chat", "5", "--token-file", str(token_file),
                        "--api-base-url", fake.base_url])
    assert result.code == 75
    assert "run setup again with --delete-webhook" in result.err
    assert methods(fake) == ["getMe", "getWebhookInfo"]


def test_remove_takes_no_delete_webhook(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = invoke(capsys, ["setup", "telegram", "--remove", "default", "--delete-webhook"])
    assert (result.code, result.err) == (2, "Error: --remove takes no --delete-webhook\n")


# --- the token stays out of PTB's logs and exceptions ---------------------------------------


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        todo += [item.__cause__, item.__context__]


ECHO = f"Internal Server Error at /bot{TOKEN}/getMe ({SECRET_PART})"


@pytest.mark.parametrize("fault", [Fault.error(500, ECHO), Fault.error(401, ECHO), Fault.drop(),
                                   Fault.non_json(), Fault.ok_without_result()],
                         ids=["500-echo", "401-echo", "dropped", "not-json", "ok-without-user"])
def test_no_ptb_log_record_or_exception_holds_the_token(
    fake: FakeBotApi, caplog: pytest.LogCaptureFixture, fault: Fault
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger: PTB's, httpx's, httpcore's
    fake.inject("getMe", fault)
    with pytest.raises((BotApiUnavailable, ConfigInvalid)) as raised:
        verify_token(TOKEN, fake.base_url)
    texts = [caplog.text, *(r.getMessage() for r in caplog.records)]
    for exc in _chain(raised.value):
        texts += [str(exc), repr(exc), *traceback.format_exception(exc)]
    assert any(r.name == "telegram.Bot" for r in caplog.records)  # PTB did log, at DEBUG
    assert [t for t in texts if TOKEN in t or SECRET_PART in t] == []


def test_a_successful_setup_logs_no_token_and_no_repr_shows_it(
    home: Path, fake: FakeBotApi, token_file: Path, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG)
    fake.set_webhook(HOOK)
    result = invoke(capsys, setup_args(token_file, fake.base_url, "--delete-webhook"))
    assert result.code == 0, result.err
    assert any("Set Bot API URL" in r.getMessage() for r in caplog.records)  # PTB logs its URL
    assert TOKEN not in caplog.text and SECRET_PART not in caplog.text
    assert_token_nowhere(result, home)
    bot = SetupBot(TOKEN, fake.base_url, connect_timeout=1, io_timeout=1, pool_timeout=1)
    texts = [repr(bot), repr(bot._bot), str(bot._bot), repr(vars(bot))]
    assert [t for t in texts if SECRET_PART in t] == []

