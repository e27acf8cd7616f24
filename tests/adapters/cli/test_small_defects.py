"""Smaller defects found on the way (issue 18, item 5), each through a real `piw-channels`
child process in a temporary HOME."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.channels.telegram.helpers import (
    PROFILE,
    configure_telegram_profile,
    resolutions,
)
from tests.conftest import child_env
from tests.paths import ROOT
from tests.shifted_clock import CLI_SHIFTED, CLOCK_OFFSET_ENV

MINUTE = 60_000


def piw(home: Path, *args: str, minutes: float = 0) -> subprocess.CompletedProcess[str]:
    env = child_env(home)
    env[CLOCK_OFFSET_ENV] = str(int(minutes * MINUTE))
    return subprocess.run([*CLI_SHIFTED, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=90)


def ask(home: Path, *args: str) -> str:
    done = piw(home, "ask", "--title", "Ship it?", "--choice", "yes=Yes", "--choice", "no=No",
               *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_poll_with_an_unknown_profile_lists_the_configured_ones(home: Path) -> None:
    configure_telegram_profile(home, "http://127.0.0.1:9")
    done = piw(home, "poll", "--profile", "nope")
    assert done.returncode == 78
    [line] = done.stderr.splitlines()
    assert "Telegram profile nope is not configured" in line and f"(configured: {PROFILE})" in line


def test_expire_v_names_the_decision(home: Path) -> None:
    decision_id = ask(home, "--timeout", "10m", "--default", "no")
    done = piw(home, "expire", "-v", minutes=11)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{decision_id}: "), done.stdout


def test_backup_into_a_missing_directory_is_a_usage_error(home: Path) -> None:
    assert piw(home, "init").returncode == 0
    done = piw(home, "backup", str(home / "no-such-dir" / "copy.sqlite"))
    assert (done.returncode, done.stdout) == (2, "")
    [line] = done.stderr.splitlines()
    assert line.startswith(f"Error: {home / 'no-such-dir'} is not a directory")


def test_an_argparse_error_is_one_error_line_with_exit_2(home: Path) -> None:
    done = piw(home, "decisions", "--no-such-option")
    assert (done.returncode, done.stdout) == (2, "")
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: piw-channels") and "--no-such-option" in line


def test_poll_without_telegram_still_applies_deadlines(home: Path) -> None:
    decision_id = ask(home, "--timeout", "10m", "--default", "no")
    done = piw(home, "poll", minutes=11)
    assert done.returncode == 78  # the hint: no Telegram channel is configured
    assert [r[:2] for r in resolutions(decision_id)] == [("accepted", "timeout_policy")]


def test_resend_without_profile_uses_the_only_one(home: Path) -> None:
    configure_telegram_profile(home, "http://127.0.0.1:9")
    decision_id = ask(home)
    done = piw(home, "resend", decision_id)
    assert done.returncode == 2  # it got as far as the decision: never delivered there
    assert f"was never delivered on telegram:{PROFILE}" in done.stderr, done.stderr
