"""Faults around the poller itself (issue 18, item 4): a killed poller's lease is taken over
at once (also after the clock stepped back), a database file replaced or deleted under a
running poller is noticed before it confirms updates, and an exclusive lock is 75 in one
line. Real `piw-channels` children against the loopback fake Bot API.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from adapters.telegram.fake import FakeBotApi
from state.files import default_path
from tests.channels.telegram.helpers import (
    CLI,
    TOKEN,
    channel_id_of,
    configure_telegram_profile,
    db_value,
    kill_hard,
    push_plain_message,
    reap,
    wait_in_flight,
)
from tests.cli import piw
from tests.conftest import child_env
from tests.paths import ROOT
from tests.shifted_clock import CLI_SHIFTED, CLOCK_OFFSET_ENV

HOUR = 3_600_000


@pytest.fixture
def fake(home: Path) -> Iterator[FakeBotApi]:
    with FakeBotApi(token=TOKEN) as server:
        configure_telegram_profile(home, server.base_url)
        yield server


def kill_a_poller_holding_the_lease(home: Path, fake: FakeBotApi, offset_ms: int = 0) -> None:
    """SIGKILL a `poll --for 30` (its clock `offset_ms` ahead) while it holds the lease."""
    before = len(fake.requests("getUpdates"))
    env = child_env(home)
    env[CLOCK_OFFSET_ENV] = str(offset_ms)
    poller = subprocess.Popen([*CLI_SHIFTED, "poll", "--for", "30"], cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_in_flight(fake, "getUpdates", before + 1)  # it holds the channel lease now
        kill_hard(poller)
    finally:
        reap(poller)


def lease_events() -> list[str]:
    resource = f"channel:{channel_id_of()}"
    return [str(db_value("SELECT group_concat(event_type, ' ') FROM (SELECT event_type FROM"
                         " events WHERE resource_id = ? ORDER BY resource_revision)",
                         resource))]


@pytest.mark.parametrize("ahead_ms", [0, HOUR], ids=["same clock", "clock stepped back"])
def test_a_killed_pollers_lease_is_taken_over_at_once(
    home: Path, fake: FakeBotApi, ahead_ms: int,
) -> None:
    """Also when the clock stepped back an hour since the killed poller took its lease (which
    then looks an hour longer to live)."""
    kill_a_poller_holding_the_lease(home, fake, offset_ms=ahead_ms)
    calls = len(fake.requests("getUpdates"))
    done = piw(home, "poll", "--once", "-v")
    assert done.returncode == 0, done.stderr
    assert "polled" in done.stderr and "skipped" not in done.stderr, done.stderr
    assert len(fake.requests("getUpdates")) == calls + 1, piw(home, "status", "--json").stdout
    assert "channel.lease_taken_over" in lease_events()[0]


def test_status_does_not_call_a_killed_poller_polling_now(home: Path, fake: FakeBotApi) -> None:
    assert piw(home, "poll", "--once").returncode == 0
    kill_a_poller_holding_the_lease(home, fake)
    done = piw(home, "status")
    assert "polling now" not in done.stdout, done.stdout


def test_an_exclusive_lock_is_75_in_one_line(home: Path, fake: FakeBotApi) -> None:
    assert piw(home, "poll", "--once").returncode == 0
    holder = apsw.Connection(str(default_path()))
    try:
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        # One child waits out the product's own busy timeout; the rest wait a short one here.
        for args in (["poll", "--once"], ["decisions"], ["init"], ["status"]):
            done = piw(home, *args, process=args == ["poll", "--once"],
                       busy_timeout_ms=None if args == ["poll", "--once"] else 100)
            assert done.returncode == 75, (args, done.stderr)
            assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1, \
                (args, done.stderr)
            assert "stayed locked by another process" in done.stderr
        status = piw(home, "status", "--json", busy_timeout_ms=100)  # the health check lists it
        assert status.returncode == 75
        [item] = json.loads(status.stdout)["needs_attention"]
        assert item["kind"] == "database" and "stayed locked" in item["message"]
    finally:
        holder.close()


@pytest.mark.parametrize("fault", ["deleted", "replaced"])
def test_a_database_deleted_or_replaced_under_a_poller_confirms_no_update(
    home: Path, fake: FakeBotApi, fault: str,
) -> None:
    assert piw(home, "poll", "--once").returncode == 0
    before = len(fake.requests("getUpdates"))
    poller = subprocess.Popen([*CLI, "poll", "--for", "30"], cwd=ROOT, env=child_env(home),
                              text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_in_flight(fake, "getUpdates", before + 1)  # the long poll
        db = default_path()
        moved = db.with_name("moved-away.sqlite")
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{db}{suffix}").exists():
                Path(f"{db}{suffix}").rename(f"{moved}{suffix}")
        if fault == "replaced":
            assert piw(home, "init").returncode == 0  # another, empty database at the path
        update_id = push_plain_message(fake)
        _, err = poller.communicate(timeout=60)
        code = poller.returncode
    finally:
        reap(poller)
    assert code == 65, err
    assert f"{db} was {'deleted' if fault == 'deleted' else 'replaced'}" in err, err
    # The update was received, but never confirmed: Telegram sends it again.
    offsets = [r.params.get("offset") for r in fake.requests("getUpdates")]
    assert str(update_id + 1) not in offsets, offsets
    assert db.exists() == (fault == "replaced")  # nothing created a new file


def test_the_next_poll_does_not_create_an_empty_database_in_place_of_a_deleted_one(
    home: Path, fake: FakeBotApi,
) -> None:
    """The decisions and the presses were in the deleted file: `poll` and `ask` refuse with
    65 and the way back, `status` lists it, and only an explicit `init` starts afresh."""
    assert piw(home, "poll", "--once").returncode == 0
    db = default_path()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    for command in (("poll", "--once"), ("ask", "--title", "T", "--choice", "a=A"),
                    ("expire",)):
        done = piw(home, *command)
        assert done.returncode == 65, done
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and "it was deleted or moved" in lines[0], lines
        assert "piw-channels init" in lines[0] and "cp BACKUP" in lines[0], lines
        assert not db.exists()  # nothing created in its place
    status = piw(home, "status", "--json")
    assert status.returncode == 65, status
    items = json.loads(status.stdout)["needs_attention"]
    assert [i["exit_code"] for i in items] == [65] and "restore it" in items[0]["message"]
    assert not db.exists()
    assert piw(home, "init").returncode == 0
    assert piw(home, "poll", "--once").returncode == 0
