"""`status` with many Pi sessions: distinct lines for live ones, a count for closed ones."""

from __future__ import annotations

from adapters.cli.status_text import render_status
from channels import store
from channels.pi import deliveries, sessions
from channels.reports.status import status_report
from state.database import Database
from tests.adapters.pi.helpers import ask

SESSIONS = [f"0b6f7a52-9c1e-4c55-8f6e-2f4b1c9d7e1{n}" for n in range(5)]


def test_closed_sessions_are_counted_and_open_ones_told_apart(db: Database) -> None:
    # D10: every `--no-session` start left one more identical `pi:session:` line.
    handle = ask(db)
    now = db.clock.now_ms()
    channel_ids = [db.write(lambda c, s=s: sessions.register_session(c, s, now))
                   for s in SESSIONS]
    lease = db.write(lambda c: store.claim(c, channel_ids[0], "bridge-1", now, db.entropy))
    db.write(lambda c: store.claim(c, channel_ids[1], "bridge-2", now, db.entropy))
    found = db.read(lambda c: deliveries.undelivered(c, channel_ids[0], SESSIONS[0], None))
    db.write(lambda c: deliveries.record_deliveries(c, lease, channel_ids[0], found, now))
    text = render_status(status_report(db), "/nonexistent")
    session_lines = [line for line in text.splitlines() if line.startswith("pi:session:")]
    assert len(session_lines) == 2 and len({line.split(":")[2] for line in session_lines}) == 2
    assert "Closed Pi sessions with nothing waiting: 3." in text
    assert not any(s in text for s in SESSIONS)  # session ids stay private
    assert handle.decision_id not in text
