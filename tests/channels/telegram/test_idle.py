"""A poll with nothing to do idles: it records only the channel lease's claim and release,
and a `poll --for` window long-polls instead of spinning on zero-timeout getUpdates calls."""

from __future__ import annotations

from pathlib import Path

from adapters.telegram.fake import FakeBotApi
from state.database import Database
from tests.channels.telegram.helpers import (
    TOKEN,
    configure_telegram_profile,
    open_decision,
    poll_in_process,
    press_button,
    run_cli,
)


def _events(db: Database) -> list[str]:
    return [str(t) for (t,) in db.conn.execute("SELECT event_type FROM events ORDER BY event_seq")]


def test_an_idle_pass_records_only_the_lease_claim_and_release(home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            handle = open_decision(db)
            poll_in_process(db)  # delivers
            press_button(fake, handle, "continue", 1)
            poll_in_process(db)  # resolves and settles; the cursor now stands after the press
            poll_in_process(db)
            before = _events(db)
            poll_in_process(db)
            poll_in_process(db)
            after = _events(db)
    assert after[len(before):] == ["channel.lease_acquired", "channel.lease_released"] * 2
    assert len(fake.requests("getUpdates")) >= 4  # the idle passes did poll


def test_an_idle_poll_for_window_long_polls_without_spinning(home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            before = _events(db)
        # 8 s: one long poll of about 6 s; what is left is too short for another one. The old
        # loop spent the last seconds on zero-timeout calls (hundreds in an idle minute).
        result = run_cli(home, "poll", "--for", "8")
        assert result.returncode == 0, result.stderr
        calls = fake.requests("getUpdates")
        with Database.open_reader() as db:
            after = _events(db)
    timeouts = [int(r.params["timeout"]) for r in calls]
    assert 1 <= len(calls) <= 2, timeouts
    assert all(t >= 1 for t in timeouts), timeouts
    new = after[len(before):]
    assert new[0] == "channel.registered"  # the first pass registers the channel
    assert new[1:] == ["channel.lease_acquired", "channel.lease_released"]
