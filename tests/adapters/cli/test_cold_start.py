"""A cron `poll --once` loads only what the pass needs: not the CLI's other command groups,
not python-telegram-bot (its package init loads every Bot API class), not tenacity (only a
contended database write needs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from adapters.telegram.fake import FakeBotApi
from tests.channels.telegram.helpers import TOKEN, configure_telegram_profile
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
