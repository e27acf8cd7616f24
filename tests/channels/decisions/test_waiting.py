"""`ask --wait` looks for its answer often (every 0.1 s) and must not take the write lock to
look: its run lease is renewed in a write transaction only when it nears expiry."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import apsw
import pytest

from channels.decisions import resolution, workflows
from channels.decisions.records import Resolution
from state import leases
from state.clock import ManualClock
from state.database import Database
from state.errors import DatabaseBusy
from tests.channels.decisions import helpers

CHOICES = {"yes": {"label": "Yes"}, "no": {"label": "No"}}


def _ask(db: Database) -> workflows.AskHandle:
    spec = workflows.AskSpec(title="Wait for me?", choices=CHOICES,
                             presentation=workflows.presentation_for("Wait for me?", None, None))
    return workflows.create_ask(db, spec, workflows.new_owner_id(db, "test"))


def test_a_waiter_renews_its_run_lease_without_the_write_lock_until_it_nears_expiry(
        home: Path, clock: ManualClock) -> None:
    with Database.open_writer(clock=clock) as db:
        lease = _ask(db).run.lease
        db.busy_attempts = 1
        db.conn.set_busy_timeout(50)
        blocker = apsw.Connection(str(db.path))
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock the whole time
        try:
            assert workflows.renew_run(db, lease) == lease  # looked, took no lock
            clock.advance(leases.TTL_MS - leases.RENEW_WHEN_LEFT_MS + 1)
            with pytest.raises(DatabaseBusy):  # now it must write, and waits for the lock
                workflows.renew_run(db, lease)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        renewed = workflows.renew_run(db, lease)
    assert renewed.expires_at == clock.now + leases.TTL_MS


def test_a_waiter_looks_for_its_answer_while_another_writer_holds_the_lock(
        home: Path, clock: ManualClock) -> None:
    """The whole wait, not only the renewal: while another connection holds the write lock,
    the waiter keeps looking (data_version, read snapshots) and never asks for the lock (with
    one attempt and a short busy timeout, a write would fail it); the answer that writer
    commits is the one the waiter returns."""
    with Database.open_writer(clock=clock) as waiter, Database.open_writer(clock=clock) as other:
        handle = _ask(waiter)
        waiter.busy_attempts = 1
        waiter.conn.set_busy_timeout(50)
        statements: list[tuple[bool, str]] = []
        committed = threading.Event()

        def trace(_cursor: apsw.Cursor, sql: str, _bindings: object) -> bool:
            statements.append((committed.is_set(), sql))
            return True

        waiter.conn.exec_trace = trace
        outcome: dict[str, object] = {}

        def wait() -> None:
            try:
                outcome["resolution"] = workflows.wait_for_resolution(
                    waiter, handle, poll_seconds=0.01)
            except BaseException as exc:  # reported by the test's thread
                outcome["error"] = exc

        other.conn.execute("BEGIN IMMEDIATE")  # the other writer holds the lock from here
        thread = threading.Thread(target=wait)
        thread.start()
        try:
            looks = 0
            for _ in range(3000):  # until the waiter looked a few times (or it stopped)
                looks = sum(sql == "PRAGMA data_version" for _, sql in list(statements))
                if looks >= 5 or not thread.is_alive():
                    break
                time.sleep(0.01)
            assert looks >= 5 and thread.is_alive(), (looks, outcome)
            resolution.resolve(other.conn, helpers.answer(handle, {"choice": "yes"}, "k1"),
                               clock.now_ms(), allowed_channels=("pi",))
        finally:
            other.conn.execute("COMMIT")
            committed.set()
            thread.join(timeout=60)
    assert not thread.is_alive()
    assert "error" not in outcome, outcome
    found = outcome["resolution"]
    assert isinstance(found, Resolution)
    assert (found.outcome, found.choice) == ("accepted", "yes")
    while_held = [sql for done, sql in statements if not done]
    assert not [sql for sql in while_held if "IMMEDIATE" in sql or "EXCLUSIVE" in sql]
    assert any(sql == "BEGIN IMMEDIATE" for done, sql in statements if done)  # then it wrote
