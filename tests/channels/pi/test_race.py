"""A Pi answer and a Telegram answer for the same decision, in real processes released by a
barrier: exactly one winner, and the channel that lost is settled too.

The Telegram side calls the resolution function the way the poll worker's inbox processing
does, so both sides meet at a barrier for every decision; `test_race_with_poll.py` runs the
same race through a real `poll` process.
"""

from __future__ import annotations

import multiprocessing
from collections import defaultdict
from pathlib import Path

import apsw

from channels import messages, store
from channels.pi import deliveries, sessions
from state import effects
from state.database import Database
from tests.adapters.pi import race_worker
from tests.adapters.pi.helpers import SESSION, BridgeProcess, ask, route_to_telegram

ROUNDS = 6


def present_everywhere(db: Database) -> list[dict[str, str]]:
    """Open decisions shown in the Pi session and on Telegram (so both get a settlement)."""
    now = db.clock.now_ms()
    pi_id = sessions.session_channel_id(SESSION)
    telegram_id = store.telegram_channel_id("default")
    lease = sessions.claim_channel(db, pi_id, SESSION, "setup", wait_seconds=0)
    db.write(lambda c: store.ensure_channel(c, telegram_id, "telegram", "default", now))
    handles = [ask(db) for _ in range(ROUNDS)]
    found = db.read(lambda c: deliveries.undelivered(c, pi_id, SESSION, None))
    assert len(found) == ROUNDS
    db.write(lambda c: deliveries.record_deliveries(c, lease, pi_id, found, now))

    def telegram_rows(conn: apsw.Connection) -> None:
        for handle in handles:
            message_id = messages.message_id_for(telegram_id, "delivery", handle.decision_id)
            messages.ensure_message(conn, message_id, telegram_id, handle.decision_id, "delivery",
                                 "text", now)

    db.write(telegram_rows)
    db.write(lambda c: lease.release(c, now))
    return [{"decision_id": h.decision_id, "digest": h.request.request_digest} for h in handles]


def test_pi_and_telegram_race_one_winner_and_the_loser_is_settled(
        home: Path, db: Database) -> None:
    route_to_telegram(home)
    targets = present_everywhere(db)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    procs = [ctx.Process(target=race_worker.pi_side, args=(barrier, SESSION, targets, results)),
             ctx.Process(target=race_worker.telegram_side, args=(barrier, targets, results))]
    for proc in procs:
        proc.start()
    outcomes: dict[str, dict[str, str]] = defaultdict(dict)
    for _ in range(2 * ROUNDS):
        decision_id, side, result = results.get(timeout=120)
        outcomes[decision_id][side] = result
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    for outcome in outcomes.values():
        assert sorted(outcome.values()) == ["already_resolved", "won"], outcome
    pi_won = {d for d, o in outcomes.items() if o["pi"] == "won"}

    winners = {str(d): str(c) for d, c in db.conn.execute(
        "SELECT decision_id, channel FROM human_decision_resolutions")}
    assert winners == {d: "pi" if d in pi_won else "telegram:default" for d in outcomes}
    # Both channels presented every decision, so each has its settlement, whoever won.
    pi_id = sessions.session_channel_id(SESSION)
    telegram_id = store.telegram_channel_id("default")
    for effect_type, channel_id in (("pi.settle", pi_id), ("telegram.settle", telegram_id)):
        assert db.conn.execute("SELECT count(*) FROM effects WHERE effect_type = ? AND"
                               " idempotency_key = ?", (effect_type, effects.scoped_key(channel_id))
                               ).get == ROUNDS

    # The Pi session's bridge tells the session about every outcome, Telegram wins included.
    bridge = BridgeProcess(home)
    try:
        bridge.send({"type": "hello", "session_id": SESSION, "pi_version": "0.73.1",
                     "mode": "tui"})
        settled = {}
        for _ in range(ROUNDS):
            line = bridge.read()
            assert line is not None and line["type"] == "settle", line
            settled[line["decision_id"]] = line["text"].splitlines()[0]
        bridge.close_stdin()
        assert bridge.wait() == 0
    finally:
        bridge.kill()
    assert settled == {d: "Accepted: Continue" if d in pi_won else "Accepted: Stop"
                       for d in outcomes}
    assert db.conn.execute("SELECT count(*) FROM effects WHERE effect_type = 'pi.settle'"
                           " AND status = 'applied'").get == ROUNDS
