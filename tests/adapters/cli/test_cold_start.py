"""A cron `poll --once` loads only what the pass needs: not the CLI's other command groups,
not python-telegram-bot (its package init loads every Bot API class), not tenacity (only a
contended database write needs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from adapters.telegram.fake import FakeBotApi
from state.database import Database
from tests.channels.telegram.helpers import (
    TOKEN,
    configure_telegram_profile,
    open_decision,
    poll_in_process,
    press_button,
)
from tests.conftest import child_env

PROBE = """
import json, sys
sys.argv = ["piw-channels", "poll", "--once"]
from adapters.cli.main import run
code = run()
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def test_a_cron_poll_imports_neither_ptb_nor_tenacity_nor_other_commands(home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        out = subprocess.run([sys.executable, "-c", PROBE], env=child_env(home),
                             capture_output=True, text=True, timeout=60)
        polled = len(fake.requests("getUpdates"))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.splitlines()[-1])
    assert (report["code"], polled) == (0, 1)
    loaded = set(report["modules"])
    unwanted = {m for m in loaded if m.split(".")[0] in ("telegram", "tenacity")}
    other_commands = {f"adapters.cli.{g}" for g in ("database", "decisions", "setup", "demo",
                                                    "pi")} & loaded
    assert unwanted == set()
    assert other_commands == set()
    assert "adapters.cli.telegram" in loaded  # (the probe did run the poll command)


def test_python_x_importtime_of_a_cron_poll_lists_no_ptb_module(home: Path) -> None:
    # The console script's own launch (pyproject: adapters.cli.main:main), traced by Python's
    # import timer: every module imported, by its full name, on stderr.
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-c",
             "import sys; from adapters.cli.main import main; sys.exit(main())",
             "poll", "--once"],
            env=child_env(home), capture_output=True, text=True, timeout=60)
        polled = len(fake.requests("getUpdates"))
    assert (out.returncode, polled) == (0, 1), out.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines()
                if line.startswith("import time:") and "|" in line]
    assert "adapters.cli.telegram" in imported  # (the trace did see the poll's own modules)
    assert [m for m in imported if m.split(".")[0] == "telegram"] == []


# What only a pass with work runs (issue 27: an idle cron pass's start-up is most of its cost,
# and each of these was imported by every pass): processing updates, applying effects, the
# card's rendering, resolving a decision, the views of troubled notifications.
WORK_ONLY = {
    "channels.telegram.inbound", "channels.telegram.commands", "channels.telegram.presses",
    "channels.telegram.text_answers", "channels.telegram.membership",
    "channels.decisions.resolution", "channels.telegram.documents", "channels.pi.gating",
    "channels.telegram.settle_sends", "channels.telegram.plans", "channels.telegram.giving_up",
    "channels.telegram.sent", "channels.telegram.card", "channels.telegram.muting",
    "channels.telegram.outcomes", "channels.decisions.history", "channels.notifications.views",
}


def _poll_modules(home: Path) -> set[str]:
    out = subprocess.run([sys.executable, "-c", PROBE], env=child_env(home),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.splitlines()[-1])
    assert report["code"] == 0
    return set(report["modules"])


def test_an_idle_cron_poll_loads_none_of_what_only_work_needs(home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        loaded = _poll_modules(home)
        assert len(fake.requests("getUpdates")) == 1
    assert "channels.telegram.poll" in loaded  # (the probe did run a pass)
    assert WORK_ONLY & loaded == set()


def test_a_pass_with_a_press_loads_what_it_processes_and_settles(home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        with Database.open_writer() as db:
            handle = open_decision(db)
            poll_in_process(db)  # delivers
        press_button(fake, handle, "continue", 1)
        loaded = _poll_modules(home)
        with Database.open_reader() as db:
            won = db.conn.execute("SELECT count(*) FROM human_decision_submissions"
                                  " WHERE result = 'won'").get
    assert won == 1  # the child process resolved the press
    assert {"channels.telegram.inbound", "channels.decisions.resolution",
            "channels.telegram.settle_sends"} <= loaded
