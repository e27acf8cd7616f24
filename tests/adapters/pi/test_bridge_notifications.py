"""The bridge alone, as the extension drives it: a run's notification for the session is
offered once (its attempt written before the line), its receipt is the Pi entry id, and an
attempt left open by a killed bridge is offered again by the next one, whose receipt says
it adopted the entry the session already has; and `notify_state` tells `/notify on` whether a
post would reach a phone."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from channels.notifications import producing
from channels.notifications.producing import NotifySpec
from channels.notifications.records import Notification
from channels.pi import notes
from state import effects
from state.clock import ManualClock
from state.database import Database
from tests.adapters.pi.helpers import SESSION, BridgeProcess, count, route_to_telegram

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


@contextmanager
def _bridges(home: Path, *windows: bool) -> Iterator[list[BridgeProcess]]:
    """Bridge processes (`True`: started as a Pi window's), killed at the end whatever
    happened."""
    started: list[BridgeProcess] = []
    try:
        for window in windows:
            started.append(BridgeProcess(home, window=window))
        yield started
    finally:
        for bridge in started:
            bridge.kill()


def _offered(bridge: BridgeProcess, timeout: float = 15) -> str:
    """The notification the bridge's next line offers (that line must be a `notify`)."""
    line = bridge.read(timeout=timeout)
    assert line is not None and line["type"] == "notify", line
    return str(line["notification_id"])


def _receipt(bridge: BridgeProcess, n: Notification, entry_id: str, *,
             adopted: bool = False) -> None:
    bridge.send({"type": "notified", "notification_id": n.notification_id,
                 "entry_id": entry_id, "adopted": adopted})


def _stop(bridge: BridgeProcess, bye: str | None = None) -> None:
    """Close the bridge's stdin (after `bye` when given); it exits cleanly."""
    if bye is not None:
        bridge.send({"type": "bye", "reason": bye})
    bridge.close_stdin()
    assert bridge.wait() == 0


def test_a_notification_is_offered_once_with_its_intent_first_and_settled_by_the_entry(
        home: Path, db: Database) -> None:
    done = _notify(db, "All 12 tables imported.")
    other = _notify(db, "Not for this session.", session="aaaaaaaa-9c1e-4c55-8f6e-2f4b1c9d7e10")
    n = done.notification
    with _bridges(home, False) as [bridge]:
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
        _receipt(bridge, n, "4f1c2a9e")
        bridge.send({"type": "notified", "notification_id": "notification-nope",
                     "entry_id": "4f1c2a9e", "adopted": False})
        error = bridge.read()
        assert error is not None and error["code"] == "unknown_notification"
        # Another session's notification is not this bridge's to confirm.
        _receipt(bridge, other.notification, "4f1c2a9e")
        error = bridge.read()
        assert error is not None and error["code"] == "unknown_notification"
        _stop(bridge)
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
    with _bridges(home, False, False) as [first, second]:
        first.send(HELLO)
        assert _offered(first) == n.notification_id
        first.kill()  # SIGKILL after the line went out: the extension may have shown it
        assert _status(db, n.effect_id) == "applying"
        second.send(HELLO)
        assert _offered(second) == n.notification_id
        # The extension found the entry in the branch: the receipt adopts it.
        _receipt(second, n, "9a8b7c6d", adopted=True)
        _stop(second)
    assert _attempts(db, n.effect_id) == [(1, "interrupted"), (2, "applied")]
    assert db.read(lambda c: notes.note_receipt(c, n.notification_id)) == {
        "entryId": "9a8b7c6d", "adopted": True}
    assert count(db, "SELECT count(*) FROM effects WHERE effect_type = 'pi.notify'") == 1


def test_a_second_bridge_of_the_session_never_offers_what_the_first_has_open(
        home: Path, db: Database) -> None:
    # Two paths to one target: the database decides. The window that waits for the lease
    # sends nothing; once the first has the receipt, nothing is left to offer.
    n = _notify(db, "Backup verified.").notification
    with _bridges(home, True, False) as [first, second]:
        first.send(HELLO)
        assert _offered(first) == n.notification_id
        second.send(HELLO)
        waiting = second.read()
        assert waiting is not None and waiting["code"] == "lease_held"
        _receipt(first, n, "0e1f2a3b")
        _stop(first, bye="quit")
        assert second.read(timeout=3) is None  # it takes the lease; nothing to offer
        _stop(second)
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
    db.write(lambda c: effects.get(c, second.effect_id).begin_attempt(
        c, "channel", owner_id, clock.now_ms(), db.entropy))
    try:
        with _bridges(home, False) as [bridge]:
            bridge.send(HELLO)
            assert _offered(bridge) == first.notification_id
            assert bridge.read(timeout=1) is None  # the live owner's attempt is not touched
            owner.kill()
            owner.wait()
            # The next look (every few seconds) finds its owner gone and offers it again.
            assert _offered(bridge, timeout=20) == second.notification_id
            for n in (first, second):
                _receipt(bridge, n, "5d4c3b2a")
            _stop(bridge)
    finally:
        owner.kill()
    assert _attempts(db, first.effect_id) == [(1, "applied")]
    assert _attempts(db, second.effect_id) == [(1, "interrupted"), (2, "applied")]


def _notify_state(bridge: BridgeProcess, event_id: str) -> dict[str, Any] | None:
    bridge.send({"type": "notify_state", "event_id": event_id})
    return bridge.read()


def test_notify_state_names_the_telegram_routes_a_post_would_reach_and_none_without_one(
        home: Path, db: Database) -> None:
    # What `/notify on` asks: with no Telegram route, the session's posts reach no phone.
    with _bridges(home, False) as [bridge]:
        bridge.send(HELLO)
        assert _notify_state(bridge, "notes.1") == {
            "type": "notify_state", "event_id": "notes.1", "audience": "operator",
            "delivered_to": [], "problem": None}
        route_to_telegram(home, pi_too=False)
        assert _notify_state(bridge, "notes.2") == {
            "type": "notify_state", "event_id": "notes.2", "audience": "operator",
            "delivered_to": ["telegram:default"], "problem": None}
        channels = home / ".config" / "pi-workflows" / "channels.json"
        channels.write_text("{")  # unreadable: said once as an error, then in the answer
        bridge.send({"type": "notify_state", "event_id": "notes.3"})
        error, state = bridge.read(), bridge.read()
        assert error is not None and error["type"] == "error"
        assert state is not None and state["delivered_to"] == []
        assert state["problem"] is not None and "channels.json" in state["problem"]
        _stop(bridge)
    assert count(db, "SELECT count(*) FROM channels") == 0  # a reading: nothing written
