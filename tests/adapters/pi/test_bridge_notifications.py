"""The bridge alone, as the extension drives it: a run's notification for the session is
offered once (its attempt written before the line), its receipt is the Pi entry id, and an
attempt left open by a killed bridge is offered again by the next one, whose receipt says
it adopted the entry the session already has."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from channels.notifications import producing
from channels.notifications.producing import NotifySpec
from channels.pi import notes
from state import effects
from state.clock import ManualClock
from state.database import Database
from tests.adapters.pi.helpers import SESSION, BridgeProcess, count

HELLO = {"type": "hello", "session_id": SESSION, "pi_version": "0.73.1", "mode": "rpc"}


def _notify(db: Database, text: str, *, kind: str = "final",
            session: str = SESSION) -> producing.Notified:
    spec = NotifySpec(kind=kind, text=text, session_id=session,  # type: ignore[arg-type]
                      title="Nightly import")
    return producing.notify(db, spec, None, "host:test:1:x")


def _attempts(db: Database, effect_id: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in db.conn.execute(
        "SELECT attempt_number, outcome FROM effect_attempts WHERE effect_id = ?"
        " ORDER BY attempt_number", (effect_id,))]


def _status(db: Database, effect_id: str) -> str:
    return str(db.conn.execute("SELECT status FROM effects WHERE effect_id = ?",
                               (effect_id,)).get)


def test_a_notification_is_offered_once_with_its_intent_first_and_settled_by_the_entry(
        home: Path, db: Database) -> None:
    done = _notify(db, "All 12 tables imported.")
    other = _notify(db, "Not for this session.", session="aaaaaaaa-9c1e-4c55-8f6e-2f4b1c9d7e10")
    n = done.notification
    bridge = BridgeProcess(home)
    try:
        bridge.send(HELLO)
        line = bridge.read()
        assert line == {"type": "notify", "notification_id": n.notification_id, "kind": "final",
                        "title": "Nightly import", "text": "All 12 tables imported.",
                        "run_id": n.run_id, "context": {}}
        # The intent is in the database before the receipt: the attempt is open.
        assert _status(db, n.effect_id) == "applying"
        assert _attempts(db, n.effect_id) == [(1, None)]
        # Never a second line while the attempt is open (no blind resend), whatever the ticks.
        assert bridge.read(timeout=1.5) is None
        bridge.send({"type": "notified", "notification_id": n.notification_id,
                     "entry_id": "4f1c2a9e", "adopted": False})
        bridge.send({"type": "notified", "notification_id": "notification-nope",
                     "entry_id": "4f1c2a9e", "adopted": False})
        error = bridge.read()
        assert error is not None and error["code"] == "unknown_notification"
        # Another session's notification is not this bridge's to confirm.
        bridge.send({"type": "notified", "notification_id": other.notification.notification_id,
                     "entry_id": "4f1c2a9e", "adopted": False})
        error = bridge.read()
        assert error is not None and error["code"] == "unknown_notification"
        bridge.close_stdin()
        assert bridge.wait() == 0
    finally:
        bridge.kill()
    assert _status(db, n.effect_id) == "applied"
    assert _attempts(db, n.effect_id) == [(1, "applied")]
    assert db.read(lambda c: notes.note_receipt(c, n.notification_id)) == {
        "entryId": "4f1c2a9e", "adopted": False}
    assert db.conn.execute("SELECT external_ref FROM effects WHERE effect_id = ?",
                           (n.effect_id,)).get == "4f1c2a9e"
    assert _status(db, other.notification.effect_id) == "pending"


def test_a_bridge_killed_before_the_receipt_leaves_it_to_the_next_which_records_adoption(
        home: Path, db: Database) -> None:
    n = _notify(db, "Deploy finished.").notification
    first = BridgeProcess(home)
    second = BridgeProcess(home)
    try:
        first.send(HELLO)
        line = first.read()
        assert line is not None and line["notification_id"] == n.notification_id
        first.kill()  # SIGKILL after the line went out: the extension may have shown it
        assert _status(db, n.effect_id) == "applying"
        second.send(HELLO)
        again = second.read()
        assert again is not None and again["type"] == "notify" and \
            again["notification_id"] == n.notification_id
        # The extension found the entry in the branch: the receipt adopts it.
        second.send({"type": "notified", "notification_id": n.notification_id,
                     "entry_id": "9a8b7c6d", "adopted": True})
        second.close_stdin()
        assert second.wait() == 0
    finally:
        first.kill()
        second.kill()
    assert _attempts(db, n.effect_id) == [(1, "interrupted"), (2, "applied")]
    assert db.read(lambda c: notes.note_receipt(c, n.notification_id)) == {
        "entryId": "9a8b7c6d", "adopted": True}
    assert count(db, "SELECT count(*) FROM effects WHERE effect_type = 'pi.notify'") == 1


def test_a_second_bridge_of_the_session_never_offers_what_the_first_has_open(
        home: Path, db: Database) -> None:
    # Two paths to one target: the database decides. The window that waits for the lease
    # sends nothing; once the first has the receipt, nothing is left to offer.
    n = _notify(db, "Backup verified.").notification
    first = BridgeProcess(home, window=True)
    second = BridgeProcess(home)
    try:
        first.send(HELLO)
        line = first.read()
        assert line is not None and line["type"] == "notify"
        second.send(HELLO)
        waiting = second.read()
        assert waiting is not None and waiting["code"] == "lease_held"
        first.send({"type": "notified", "notification_id": n.notification_id,
                    "entry_id": "0e1f2a3b", "adopted": False})
        first.send({"type": "bye", "reason": "quit"})
        first.close_stdin()
        assert first.wait() == 0
        assert second.read(timeout=3) is None  # it takes the lease; nothing to offer
        second.close_stdin()
        assert second.wait() == 0
    finally:
        first.kill()
        second.kill()
    assert _attempts(db, n.effect_id) == [(1, "applied")]


def test_an_attempt_of_a_live_owner_is_left_alone_and_reopened_once_its_process_is_gone(
        home: Path, db: Database, clock: ManualClock) -> None:
    clock.now = time.time_ns() // 1_000_000  # the attempt's lease is live for the bridge too
    first = _notify(db, "First.").notification
    second = _notify(db, "Second.").notification
    # Another bridge (a process that still runs) has the second one's attempt open: it lost
    # the session's lease while it lived.
    owner = subprocess.Popen(["sleep", "120"])
    owner_id = f"pi-bridge:{socket.gethostname()}:{owner.pid}:x"
    db.write(lambda c: effects.begin_attempt(c, second.effect_id, "channel", owner_id,
                                             clock.now_ms(), db.entropy))
    bridge = BridgeProcess(home)
    try:
        bridge.send(HELLO)
        line = bridge.read()
        assert line is not None and line["notification_id"] == first.notification_id
        assert bridge.read(timeout=1) is None  # the live owner's attempt is not touched
        owner.kill()
        owner.wait()
        # The next look (every few seconds) finds its owner gone and offers it again.
        line = bridge.read(timeout=20)
        assert line is not None and line["notification_id"] == second.notification_id
        for n in (first, second):
            bridge.send({"type": "notified", "notification_id": n.notification_id,
                         "entry_id": "5d4c3b2a", "adopted": False})
        bridge.close_stdin()
        assert bridge.wait() == 0
    finally:
        owner.kill()
        bridge.kill()
    assert _attempts(db, first.effect_id) == [(1, "applied")]
    assert _attempts(db, second.effect_id) == [(1, "interrupted"), (2, "applied")]
