"""`ask --wait` looks for its answer often (every 0.1 s) and must not take the write lock to
look: its run lease is renewed in a write transaction only when it nears expiry."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from channels.decisions import workflows
from state import leases
from state.clock import ManualClock
from state.database import Database
from state.errors import DatabaseBusy

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
