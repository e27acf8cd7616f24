"""The Pi-versus-Telegram race through the real entry points: a real `poll --once` process
ingests button presses from the (loopback) Bot API while a Pi session's answers are submitted
from another process. Each decision has exactly one winner, and every channel that presented
it is settled, the losing one included."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from adapters.telegram.fake import FakeBotApi
from channels import inbox
from channels.pi import deliveries, sessions
from state.database import Database
from tests.adapters.pi import race_worker
from tests.adapters.pi.helpers import SESSION, ask
from tests.channels.telegram.helpers import (
    TOKEN,
    USER,
    channel_id_of,
    configure_telegram_profile,
    press_button,
    run_cli,
    start_cli,
)

ROUNDS = 4


def _present_in_pi(db: Database, decision_ids: list[str]) -> None:
    now = db.clock.now_ms()
    channel_id = sessions.session_channel_id(SESSION)
    lease = sessions.claim_channel(db, channel_id, SESSION, "setup", wait_seconds=0)
    found = [d for d in db.read(lambda c: deliveries.undelivered(c, channel_id, SESSION, None))
             if d.decision.decision_id in decision_ids]
    db.write(lambda c: deliveries.record_deliveries(c, lease, channel_id, found, now))
    db.write(lambda c: lease.release(c, now))


def test_pi_answers_race_a_real_poll_one_winner_each_and_both_channels_settled(
    home: Path,
) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)  # operator -> pi, telegram:ops
        with Database.open_writer() as db:
            handles = [ask(db, f"Decision {i}?") for i in range(ROUNDS)]
            assert run_cli(home, "poll", "--once").returncode == 0  # delivered on Telegram
            _present_in_pi(db, [h.decision_id for h in handles])
            # Each press is on its own decision's message, as on Telegram (the delivery order
            # need not be the creation order: decisions opened in the same millisecond).
            refs = dict(db.conn.execute(
                "SELECT m.decision_id, p.external_message_ref FROM channel_message_parts p"
                " JOIN channel_messages m USING (message_id) WHERE m.purpose = 'delivery'"))
        messages = fake.sent_messages(USER)
        assert len(messages) == ROUNDS
        assert sorted(int(r) for r in refs.values()) == sorted(
            int(m["message_id"]) for m in messages)
        for handle in handles:
            press_button(fake, handle, "stop", int(refs[handle.decision_id]))
        targets = [{"decision_id": h.decision_id, "digest": h.request.request_digest}
                   for h in handles]
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(1 + 1)
        results = ctx.Queue()
        pi = ctx.Process(target=race_worker.pi_side_at_once,
                         args=(barrier, SESSION, targets, results))
        pi.start()
        barrier.wait()
        poll = start_cli(home, "poll", "--once")
        pi_results = {d: r for d, _, r in (results.get(timeout=120) for _ in handles)}
        pi.join(timeout=60)
        assert pi.exitcode == 0
        _, err = poll.communicate(timeout=120)
        assert poll.returncode == 0, err
        assert run_cli(home, "poll", "--once").returncode == 0  # applies what is left

        with Database.open_reader() as db:
            telegram = channel_id_of()
            for handle in handles:
                rows = db.conn.execute(
                    "SELECT channel FROM human_decision_resolutions WHERE decision_id = ?",
                    (handle.decision_id,)).fetchall()
                assert len(rows) == 1
                winner = rows[0][0]
                assert winner in ("pi", "telegram:ops")
                results_by_channel = dict(db.conn.execute(
                    "SELECT channel, result FROM human_decision_submissions"
                    " WHERE decision_id = ?", (handle.decision_id,)).fetchall())
                loser = "telegram:ops" if winner == "pi" else "pi"
                assert results_by_channel == {winner: "won", loser: "already_resolved"}
                assert pi_results[handle.decision_id] == results_by_channel["pi"]
                statuses = dict(db.conn.execute(
                    "SELECT effect_type, status FROM effects WHERE source_resource_id = ?"
                    " AND effect_type IN ('telegram.settle', 'pi.settle')",
                    (f"decision:{handle.decision_id}",)).fetchall())
                # Telegram settled by the poll; the Pi settlement waits for the session's bridge.
                assert statuses == {"telegram.settle": "applied", "pi.settle": "pending"}
            assert inbox.inbox_counts(db.conn, telegram) == (0, ROUNDS)
