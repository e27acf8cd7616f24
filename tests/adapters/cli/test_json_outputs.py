"""`--json` on every command that reports (issue 18, item 5): `init`, `backup`, `setup`,
`poll`, `resend`, `cancel`, `expire`. Each through a real `piw-channels` child process in a
temporary HOME, against the loopback fake Bot API where Telegram is involved; stdout is one
JSON document, and what needs a person stays on stderr as before."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.telegram.fake import FakeBotApi
from state.files import default_path
from tests.channels.telegram.helpers import (
    PROFILE,
    TOKEN,
    configure_telegram_profile,
    token_secret,
    write_token_file,
)
from tests.cli import piw

WHO = f"telegram:{PROFILE}"


@pytest.fixture
def fake(home: Path) -> Iterator[FakeBotApi]:
    with FakeBotApi(token=TOKEN) as server:
        configure_telegram_profile(home, server.base_url)
        yield server


def run(home: Path, *args: str, minutes: int = 0) -> subprocess.CompletedProcess[str]:
    return piw(home, *args, minutes=minutes)


def as_json(home: Path, *args: str, code: int = 0, minutes: int = 0) -> Any:
    done = run(home, *args, "--json", minutes=minutes)
    assert done.returncode == code, done
    assert token_secret() not in done.stdout + done.stderr
    return json.loads(done.stdout)


def ask(home: Path, *args: str) -> str:
    done = run(home, "ask", "--title", "Ship it?", "--choice", "yes=Yes", "--choice", "no=No",
               *args)
    assert done.returncode == 0, done
    return done.stdout.strip()


def test_init_and_backup(home: Path) -> None:
    assert as_json(home, "init") == {"path": str(default_path()), "created": True}
    assert as_json(home, "init") == {"path": str(default_path()), "created": False}
    dest = home / "copy.sqlite"
    report = as_json(home, "backup", str(dest))
    assert report == {"ok": True, "path": str(dest), "source": str(default_path()),
                      "schema": "ok", "integrity": "ok", "foreign_keys": "ok"}
    assert dest.stat().st_mode & 0o777 == 0o600


def test_setup_and_remove(home: Path, fake: FakeBotApi) -> None:
    token_file = write_token_file(home, name="again.token")  # the fake serves one bot
    installed = as_json(home, "setup", "telegram", "--profile", PROFILE, "--token-file",
                        str(token_file), "--user", "11", "--chat", "11", "--chat", "-100123",
                        "--audience", "team", "--api-base-url", fake.base_url)
    assert installed["profile"] == PROFILE and installed["replaced"] is True
    assert installed["routes"] == ["pi", WHO] and installed["audience"] == "team"
    assert (installed["allowed_users"], installed["allowed_chats"]) == (1, 2)
    assert installed["bot"].startswith("@") and installed["commands_set"] is True
    removed = as_json(home, "setup", "telegram", "--remove", PROFILE)
    assert removed["removed"] == PROFILE and "team" in removed["audiences"], removed


def test_poll_says_what_each_channel_did(home: Path, fake: FakeBotApi) -> None:
    decision_id = ask(home)
    report = as_json(home, "poll", "-v")
    assert report["exit_code"] == 0 and report["expiry_failures"] == []
    [channel] = report["channels"]
    assert channel["channel"] == WHO and channel["status"] == "polled", channel
    assert channel["effects"] >= 1 and channel["lines"] == []
    assert decision_id  # delivered: its card is on the wire
    assert len(fake.requests("sendMessage")) == 1


def test_poll_json_carries_the_lines_that_need_a_person(home: Path, fake: FakeBotApi) -> None:
    fake.close()  # the Bot API is gone: reported at once with --alert-after 0
    done = run(home, "poll", "--alert-after", "0", "--json")
    assert done.returncode == 75, done
    [channel] = json.loads(done.stdout)["channels"]
    assert channel["lines"] and channel["lines"] == done.stderr.splitlines()


def test_resend_reports_what_it_reserved_and_the_poll(home: Path, fake: FakeBotApi) -> None:
    report = as_json(home, "resend", "--all-failed")  # nothing failed: nothing reserved
    assert report == {"channel": WHO, "reserved": [], "poll": None}


def test_cancel(home: Path) -> None:
    decision_id = ask(home)
    assert as_json(home, "cancel", decision_id, "--reason", "not now") == {
        "decision_id": decision_id, "status": "cancelled", "already": False,
        "reason": "not now"}
    assert as_json(home, "cancel", decision_id)["already"] is True


def test_expire(home: Path) -> None:
    decision_id = ask(home, "--timeout", "10m", "--default", "no")
    report = as_json(home, "expire", minutes=11)
    [resolved] = report["resolved"]
    assert resolved["decision_id"] == decision_id and resolved["choice"] == "no", resolved
    assert report["failed"] == [] and report["skipped_live_owner"] == []
