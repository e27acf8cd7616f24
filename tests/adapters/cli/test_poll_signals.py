"""`poll` stopped by SIGTERM (a shutdown, `timeout`, a cron daemon stopping its jobs) releases
its channel lease on the way out, as Ctrl-C does, so the next pass is not skipped as busy."""

from __future__ import annotations

import signal
from pathlib import Path

from adapters.telegram.fake import FakeBotApi
from tests.channels.telegram.helpers import (
    TOKEN,
    configure_telegram_profile,
    finish,
    live_lease_owners,
    reap,
    run_cli,
    start_cli,
    wait_until,
)


def test_sigterm_during_a_long_poll_releases_the_channel_and_exits_143(home: Path) -> None:
    with FakeBotApi(TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        poller = start_cli(home, "poll", "--for", "30")
        try:
            assert fake.wait_received("getUpdates", 1, 30)  # in its long poll now
            wait_until(lambda: any(r.startswith("channel:") for r, _ in live_lease_owners()),
                       "the channel lease")
            poller.send_signal(signal.SIGTERM)
            code, _, err = finish(poller, timeout=30)
        finally:
            reap(poller)
        assert (code, err) == (143, "")
        assert [r for r, _ in live_lease_owners() if r.startswith("channel:")] == []
        again = run_cli(home, "poll", "--once", "-v")
        assert again.returncode == 0 and "busy" not in again.stderr, again.stderr
        assert len(fake.requests("getUpdates")) >= 2  # the next pass really polled
