"""Child-process scenarios for the multi-process tests (run with `python -m`)."""

from __future__ import annotations

import sys
import time

import apsw

from state import effects, leases, resources
from state.database import Database
from state.errors import LeaseHeld
from state.resources import Actor


def claim_once(barrier: object, owner: str, results: object) -> None:
    """Wait at the barrier, then try to claim the shared lease once."""
    db = Database.open_writer()
    barrier.wait()  # type: ignore[attr-defined]
    try:
        lease = db.write(lambda c: leases.claim(c, "channel:shared", "channel", owner,
                                                db.clock.now_ms(), db.entropy))
        results.put((owner, lease.generation))  # type: ignore[attr-defined]
    except LeaseHeld:
        results.put((owner, None))  # type: ignore[attr-defined]
    finally:
        db.close()


def claim_and_release(owner: str, results: object) -> None:
    """Claim the shared lease (waiting for it to be free), then release it."""
    db = Database.open_writer()
    try:
        while True:
            try:
                lease = db.write(lambda c: leases.claim(c, "channel:shared", "channel", owner,
                                                        db.clock.now_ms(), db.entropy))
                break
            except LeaseHeld:
                time.sleep(0.01)
        results.put(lease.generation)  # type: ignore[attr-defined]
        db.write(lambda c: lease.release(c, db.clock.now_ms()))
    finally:
        db.close()


def _command(c: apsw.Connection, now: int) -> None:
    resources.bump(c, "run:r1", 1, "run.waiting", Actor("host", "h"), now, payload={"step": 1})
    effects.reserve(c, source_resource_id="run:r1", source_revision=2, effect_type="run.continue",
                    idempotency_key="k", payload={"next": "step"}, owner_scope="run",
                    actor=Actor("host", "h"), now=now)


def hang_inside_transaction() -> None:
    db = Database.open_writer()

    def command(c: apsw.Connection) -> None:
        _command(c, db.clock.now_ms())
        print("inside", flush=True)
        time.sleep(600)

    db.write(command)


def hang_after_commit() -> None:
    db = Database.open_writer()
    db.write(lambda c: _command(c, db.clock.now_ms()))
    print("committed", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    {"inside": hang_inside_transaction, "after": hang_after_commit}[sys.argv[1]]()
