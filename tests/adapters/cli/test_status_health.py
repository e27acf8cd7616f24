"""`status` is a health check (issue 18, item 2): every condition that needs a person is
under "Needs attention" and in `needs_attention`, and the exit code is the highest of them (0
only when nothing needs attention). `Recovered:` comes only after a real success of the
condition's own kind. Real CLI children against the loopback fake Bot API.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import apsw
import pytest

from adapters.telegram.fake import BotError, FakeBotApi, Fault
from state.errors import CORRUPT_INSTRUCTION
from state.files import default_path
from tests.adapters.cli.test_poll_alerts import WHO, Run, cli, fake, poll
from tests.channels.telegram.helpers import open_decision_now
from tests.state.test_database_faults import _corrupt_table

__all__ = ["fake"]  # the fixture


def health(home: Path, minutes: float = 0) -> tuple[int, list[dict[str, Any]]]:
    done = cli(home, "status", "--json", minutes=minutes)
    return done.code, json.loads("\n".join(done.lines))["needs_attention"]


def kinds(items: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(i["kind"], i["exit_code"]) for i in items]


def test_a_healthy_channel_exits_0_with_nothing_listed(home: Path, fake: FakeBotApi) -> None:
    assert poll(home).code == 0
    assert health(home) == (0, [])
    assert cli(home, "status").lines[-1] == "Nothing needs attention."


def test_a_dead_cron_job_is_75_after_3_minutes(home: Path, fake: FakeBotApi) -> None:
    assert poll(home).code == 0
    code, items = health(home, minutes=7)
    assert (code, kinds(items)) == (75, [("stale", 75)])
    text = cli(home, "status", minutes=7)
    assert text.code == 75
    at = text.lines.index("Needs attention:")
    assert text.lines[at + 1].startswith(f"  {WHO}: no poll pass for 7 min (the last ended ")
    assert "Nothing needs attention." not in text.lines


def test_a_profile_that_never_polled_needs_attention(home: Path, fake: FakeBotApi) -> None:
    assert cli(home, "init").code == 0
    code, items = health(home)
    assert (code, kinds(items)) == (75, [("stale", 75)])
    assert "never polled" in items[0]["message"]


def test_a_config_that_poll_rejects_is_listed_with_its_code(
    home: Path, fake: FakeBotApi,
) -> None:
    assert poll(home).code == 0
    (home / "telegram.token").chmod(0o644)
    assert poll(home).code == 77
    code, items = health(home)
    assert code == 77 and kinds(items)[0] == ("config", 77)
    assert "chmod 600" in items[0]["message"]


def test_a_refused_delivery_is_78_and_an_ambiguous_one_75(home: Path, fake: FakeBotApi) -> None:
    open_decision_now()
    fake.inject("sendMessage", Fault.canned(BotError.BLOCKED))
    assert poll(home).code == 78
    code, items = health(home)
    assert (code, kinds(items)) == (78, [("rejected", 78)])


def test_an_ambiguous_delivery_is_75(home: Path, fake: FakeBotApi) -> None:
    open_decision_now()
    fake.inject("sendMessage", Fault.drop())
    assert poll(home).code == 75
    code, items = health(home)
    assert (code, kinds(items)) == (75, [("ambiguous", 75)])


def test_a_corrupt_database_is_65_with_the_advice_to_restore_a_backup(
    home: Path, fake: FakeBotApi,
) -> None:
    assert poll(home).code == 0
    open_decision_now()
    _corrupt_table(default_path(), "human_decisions")
    done = cli(home, "status")
    assert done.code == 65, done.lines
    [line] = done.lines  # on stderr, as every command says it
    assert line.startswith("Error: ") and line.endswith(CORRUPT_INSTRUCTION)
    code, items = health(home)
    assert (code, kinds(items)) == (65, [("database", 65)])


def _root_page(db: Path, name: str) -> tuple[int, int]:
    conn = apsw.Connection(str(db))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = int(conn.execute("PRAGMA page_size").get)
        root = int(conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = ?",
                                (name,)).get)
    finally:
        conn.close()
    return (root - 1) * size, size


def test_status_checks_pages_quickly_and_leaves_the_index_check_to_verify(home: Path) -> None:
    """`status` runs `quick_check` (every page and row, and each index's entry count, but not
    each entry against its row), `verify` the full `integrity_check`: an index whose one entry
    belongs to another database's decision is seen by `verify` only."""
    assert cli(home, "init").code == 0
    db = default_path()
    _root_page(db, "human_decisions_run")  # checkpointed: the file is the whole database
    fresh = db.read_bytes()
    open_decision_now(title="First")
    where, size = _root_page(db, "human_decisions_run")
    foreign_entry = db.read_bytes()[where:where + size]
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(fresh)
    open_decision_now(title="Second")  # another run id, in the same row and page
    assert _root_page(db, "human_decisions_run") == (where, size)
    with db.open("r+b") as f:
        f.seek(where)
        f.write(foreign_entry)
    assert health(home) == (0, [])
    verified = cli(home, "verify")
    assert verified.code == 65
    assert "row 1 missing from index human_decisions_run" in "".join(verified.lines)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into any directory")
def test_a_database_no_command_could_create_is_77(home: Path) -> None:
    (home / ".pi").mkdir(mode=0o500)
    code, items = health(home)
    assert (code, kinds(items)) == (77, [("database", 77)])


def test_no_configuration_and_no_database_is_0(home: Path) -> None:
    assert health(home) == (0, [])


def test_recovered_comes_only_after_a_successful_get_updates(
    home: Path, fake: FakeBotApi,
) -> None:
    assert poll(home).code == 0
    fake.refuse_connections()
    down = poll(home, "--alert-after", "0")
    assert down.code == 75 and down.lines[0].startswith(f"Error: {WHO}: no successful")
    # A plain poll (--alert-after 10) while it is still down: no false all-clear.
    assert poll(home) == Run(75, [])
    assert kinds(health(home)[1]) == [("unreachable", 75)]
    fake.accept_connections()
    back = poll(home)
    assert back.code == 0 and back.lines[0].startswith(f"Recovered: {WHO}: the Bot API is")
    assert health(home) == (0, [])
