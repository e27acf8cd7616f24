"""Smaller defects found on the way (issue 18, item 5), each through a real `piw-channels`
child process in a temporary HOME."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from tests.adapters.cli.test_decisions_cli import wait_for_open_decision
from tests.channels.telegram.helpers import (
    CLI,
    PROFILE,
    configure_telegram_profile,
    resolutions,
)
from tests.cli import piw
from tests.conftest import child_env
from tests.paths import ROOT

MINUTE = 60_000


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


def test_cancel_during_ask_wait_says_who_holds_the_run_and_how_to_free_it(home: Path) -> None:
    waiter = subprocess.Popen([*CLI, "ask", "--title", "Wait?", "--choice", "a=A", "--wait"],
                              cwd=ROOT, env=child_env(home), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        decision_id = wait_for_open_decision()  # the run is held from its creation on
        done = piw(home, "cancel", decision_id)
        assert done.returncode == 75, done
        [line] = done.stderr.splitlines()
        assert "held by `piw-channels ask --wait`" in line, line
        assert f"(process {waiter.pid} on " in line and f"kill {waiter.pid}" in line, line
        assert line.endswith(f"then run: piw-channels cancel {decision_id}"), line
        waiter.send_signal(signal.SIGINT)  # as the line advises
        assert waiter.wait(timeout=60) == 130
        done = piw(home, "cancel", decision_id)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"cancelled {decision_id}"), done.stdout
    finally:
        if waiter.poll() is None:
            waiter.kill()
        waiter.communicate(timeout=60)


def test_an_ambiguous_prefix_lists_candidates_with_short_titles(home: Path) -> None:
    long_title = "Deploy the web application to production after the database migration?"
    ids = [piw(home, "ask", "--title", f"{n} {long_title}", "--choice", "a=A").stdout.strip()
           for n in range(12)]
    done = piw(home, "show", "decision-")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: 'decision-' matches more than one decision: "), line
    listed = [d for d in ids if d in line]
    assert len(listed) == 10 and "; and more; give more of the decision id" in line, line
    assert long_title not in line and "0 Deploy the web application to product…)" in line, line
