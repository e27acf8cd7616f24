"""Ownership and crash tests across real processes."""

from __future__ import annotations

import multiprocessing
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from state import resources
from state.database import Database
from state.files import default_path
from state.resources import SYSTEM
from tests.conftest import child_env
from tests.paths import ROOT
from tests.state import proc_worker


def _prepare(home: Path, rid: str, kind: str) -> None:
    with Database.open_writer() as db:
        db.write(lambda c: resources.create(c, rid, kind, SYSTEM, db.clock.now_ms()))  # type: ignore[arg-type]


def test_eight_processes_released_by_a_barrier_claim_one_lease_and_exactly_one_wins(
    home: Path,
) -> None:
    _prepare(home, "channel:shared", "channel")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(8)
    results = ctx.Queue()
    procs = [ctx.Process(target=proc_worker.claim_once, args=(barrier, f"o{i}", results))
             for i in range(8)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    winners = [(o, g) for o, g in outcomes if g is not None]
    assert len(winners) == 1 and winners[0][1] == 1
    with Database.open_reader() as db:
        assert db.conn.execute(
            "SELECT count(*) FROM events WHERE event_type = 'channel.lease_acquired'").get == 1


def test_generations_strictly_increase_across_process_handoffs_and_are_never_reused(
    home: Path,
) -> None:
    _prepare(home, "channel:shared", "channel")
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=proc_worker.claim_and_release, args=(f"o{i}", results))
             for i in range(6)]
    for p in procs:
        p.start()
    generations = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sorted(generations) == [1, 2, 3, 4, 5, 6]
    with Database.open_reader() as db:
        assert db.conn.execute("SELECT generation, owner_id FROM leases").fetchone() == (6, None)


def _spawn(home: Path, scenario: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.state.proc_worker", scenario],
        cwd=ROOT, env=child_env(home), stdout=subprocess.PIPE, text=True,
    )


def _counts(db: Database) -> tuple[int, int, int]:
    return (
        int(db.conn.execute("SELECT revision FROM resources WHERE resource_id='run:r1'").get),
        int(db.conn.execute("SELECT count(*) FROM effects").get),
        int(db.conn.execute("SELECT count(*) FROM events").get),
    )


def test_a_process_killed_inside_a_write_transaction_leaves_no_partial_command(home: Path) -> None:
    _prepare(home, "run:r1", "run")
    with Database.open_reader() as db:
        before = _counts(db)
    child = _spawn(home, "inside")
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "inside"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    child.stdout.close()
    with Database.open_writer() as db:  # the next writer is not blocked by the dead one
        assert _counts(db) == before
        db.write(lambda c: resources.bump(c, "run:r1", 1, "run.waiting", SYSTEM, 1))
    assert default_path().exists()


def test_a_process_killed_after_commit_leaves_a_complete_fact_and_its_pending_effects(
    home: Path,
) -> None:
    _prepare(home, "run:r1", "run")
    child = _spawn(home, "after")
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "committed"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    child.stdout.close()
    with Database.open_reader() as db:
        revision, effects_count, _ = _counts(db)
        assert revision == 2 and effects_count == 1
        assert db.conn.execute("SELECT status FROM effects").get == "pending"
        assert db.conn.execute(
            "SELECT event_type FROM events WHERE resource_id='run:r1' AND resource_revision=2"
        ).get == "run.waiting"


@pytest.mark.parametrize("command", [["status"], ["status", "--json"], ["verify"],
                                     ["verify", "--json"]])
def test_read_commands_perform_zero_writes(home: Path, command: list[str]) -> None:
    _prepare(home, "run:r1", "run")
    path = default_path()
    before = path.read_bytes()
    watcher = Database.open_reader()
    data_version = watcher.conn.execute("PRAGMA data_version").get
    changes = watcher.conn.total_changes()
    result = subprocess.run(
        [sys.executable, "-c", "from adapters.cli.main import main; main()", *command],
        cwd=ROOT, env=child_env(home), capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert watcher.conn.execute("PRAGMA data_version").get == data_version
    assert watcher.conn.total_changes() == changes
    wal = Path(f"{path}-wal")
    assert path.read_bytes() == before
    assert not wal.exists() or wal.stat().st_size == 0
    watcher.close()
