"""Small command-line defects seen in the field, each through a real child process: exact
stderr lines and exit codes."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

from channels.decisions import records, resolution
from channels.decisions.resolution import HumanAnswer
from state.database import Database
from state.exit_codes import ExitCode
from state.version import VERSION
from tests.adapters.cli.test_decisions_cli import CLI, cli, wait_for_open_decision
from tests.channels.telegram.helpers import open_decision
from tests.conftest import child_env
from tests.paths import ROOT


def run_lease_holders() -> int:
    with Database.open_reader() as db:
        return int(db.conn.execute(
            "SELECT count(*) FROM leases l JOIN resources r USING (resource_id)"
            " WHERE r.resource_type = 'run' AND l.owner_type IS NOT NULL").get)


def test_a_timeout_too_far_away_is_a_usage_error_with_the_allowed_range(home: Path) -> None:
    result = cli(home, "ask", "--title", "T", "--choice", "a=A", "--timeout", "99999999d")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        "Error: --timeout '99999999d' is too far away: use a duration between 1ms and 3650d"]
    assert cli(home, "ask", "--title", "T", "--choice", "a=A", "--timeout", "3650d"
               ).returncode == 0


def test_poll_for_a_word_names_the_option_and_its_range(home: Path) -> None:
    result = cli(home, "poll", "--for", "abc")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [  # one Error line, as the README promises
        "Error: piw-channels poll: argument --for: --for takes seconds between 1 and 3600,"
        " not 'abc' (see: piw-channels poll --help)"]


def test_an_invalid_choice_id_says_which_characters_are_allowed(home: Path) -> None:
    result = cli(home, "ask", "--title", "T", "--choice", "a b=A")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        "Error: choice id 'a b' is invalid: use letters, digits, '_' or '-', starting with a"
        " letter or '_' (at most 128 characters)"]


def test_cancel_says_cancelled_then_already_cancelled(home: Path) -> None:
    decision_id = cli(home, "ask", "--title", "T", "--choice", "a=A").stdout.strip()
    first = cli(home, "cancel", decision_id)
    assert (first.returncode, first.stdout, first.stderr) == (
        0, f"cancelled {decision_id} (reason: cancelled)\n", "")
    for args in ((), ("--reason", "changed my mind")):
        again = cli(home, "cancel", decision_id, *args)
        assert (again.returncode, again.stdout, again.stderr) == (
            0, f"{decision_id} was already cancelled (reason: cancelled)\n", "")


def test_cancel_of_an_answered_decision_says_what_was_decided(home: Path) -> None:
    decision_id = cli(home, "ask", "--title", "T", "--choice", "yes=Yes").stdout.strip()
    with Database.open_writer() as db:
        request = db.read(lambda c: records.load(c, decision_id)).request
        db.write(lambda c: resolution.resolve(c, HumanAnswer(
            decision_id, request.request_digest, {"choice": "yes"}, "pi", "local:1000", "e1",
            "pi:e1"), db.clock.now_ms()))
    refused = cli(home, "cancel", decision_id)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.splitlines() == [
        f"Error: {decision_id} is already decided (Yes); nothing to cancel"]


def test_output_piped_into_head_ends_quietly(home: Path) -> None:
    with Database.open_writer() as db:
        for n in range(150):  # far more JSON than a pipe buffer holds
            open_decision(db, title=f"Approve plan {n}?")
    script = ("set -o pipefail; " + " ".join(f"'{a}'" for a in CLI)
              + " decisions --all --json | head -1; echo status ${PIPESTATUS[0]} >&2")
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=child_env(home),
                          capture_output=True, text=True, timeout=60)
    assert done.stdout == "[\n"
    assert done.stderr == "status 141\n"  # as SIGPIPE would end it; no "Errno 32"


def test_ask_wait_killed_with_sigterm_releases_its_run_lease(home: Path) -> None:
    proc = subprocess.Popen([*CLI, "ask", "--title", "Wait?", "--choice", "a=A", "--wait"],
                            cwd=ROOT, env=child_env(home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for_open_decision()
    assert run_lease_holders() == 1
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (143, "", "")
    assert run_lease_holders() == 0  # released now, not when the 60 s TTL runs out


def test_ask_wait_on_a_terminal_says_what_it_waits_for_and_what_ctrl_c_does(
    home: Path,
) -> None:
    main, side = pty.openpty()
    proc = subprocess.Popen([*CLI, "ask", "--title", "Wait?", "--choice", "a=A", "--wait"],
                            cwd=ROOT, env=child_env(home), stdout=subprocess.DEVNULL, stderr=side)
    os.close(side)
    try:
        decision_id = wait_for_open_decision()
        seen = b""
        while seen.count(b"\n") < 2:
            seen += os.read(main, 4096)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    with Database.open_reader() as db:
        digest = db.read(lambda c: records.load(c, decision_id)).request.presentation_digest
    assert seen.decode().splitlines() == [
        f"Waiting for Decision {digest[7:19]} ({decision_id}), sent to: pi (Telegram gets it"
        " on the next poll).",
        "Ctrl-C stops waiting; the decision stays open: answer it later, or run: piw-channels"
        f" cancel {decision_id}"]


def test_version_loads_no_command_group(home: Path) -> None:
    probe = ("import sys\nfrom adapters.cli.main import run\ncode = run(['--version'])\n"
             "print(sorted(m for m in sys.modules if m.startswith(('adapters', 'channels'))))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=child_env(home),
                          capture_output=True, text=True, timeout=60)
    version, modules = done.stdout.splitlines()
    assert version == f"piw-channels {VERSION}"
    assert json.loads(modules.replace("'", '"')) == [
        "adapters", "adapters.cli", "adapters.cli.errors", "adapters.cli.main",
        "adapters.cli.packages"]


def test_a_foreign_channels_package_is_named_at_start_up(tmp_path: Path, home: Path) -> None:
    """Django Channels is also `channels`: in a shared environment the one found first wins."""
    foreign = tmp_path / "site" / "channels"
    foreign.mkdir(parents=True)
    (foreign / "__init__.py").write_text('__version__ = "4.2.0"\n')
    env = {**child_env(home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([*CLI, "status"], cwd=foreign.parent, env=env, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"Error: the Python package 'channels' at {foreign / '__init__.py'} is not"
        " piw-channels' own (another project, such as Django Channels, uses that name in this"
        " environment); install piw-channels on its own: uv tool install"
        " /path/to/piw-channels (or pipx install /path/to/piw-channels); see the README"]


def test_ask_wait_on_a_terminal_says_where_the_decision_was_delivered(home: Path) -> None:
    from adapters.telegram.fake import FakeBotApi
    from tests.channels.telegram.helpers import PROFILE, TOKEN, configure_telegram_profile

    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        main, side = pty.openpty()
        proc = subprocess.Popen([*CLI, "ask", "--title", "Wait?", "--choice", "a=A", "--wait"],
                                cwd=ROOT, env=child_env(home), stdout=subprocess.DEVNULL,
                                stderr=side)
        os.close(side)
        try:
            wait_for_open_decision()
            seen = b""
            while seen.count(b"\n") < 2:
                seen += os.read(main, 4096)
            assert f"sent to: pi, telegram:{PROFILE} (".encode() in seen
            assert cli(home, "poll").returncode == 0
            while seen.count(b"\n") < 3:
                seen += os.read(main, 4096)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 130
        finally:
            if proc.poll() is None:
                proc.kill()
            os.close(main)
    assert seen.decode().splitlines()[2] == f"Delivered to telegram:{PROFILE}."


def test_the_top_level_help_lists_every_exit_code(home: Path) -> None:
    result = cli(home, "--help")
    assert result.returncode == 0
    epilog = " ".join(result.stdout.split("Exit codes:")[1].split())
    codes = list(ExitCode)
    assert len({code.meaning for code in codes}) == len(codes)
    for code in codes:
        assert f"{code} {code.meaning}" in epilog


def test_ask_help_says_a_choice_is_required(home: Path) -> None:
    result = cli(home, "ask", "--help")
    assert "choices (at least one --choice or --text-choice):" in result.stdout
    refused = cli(home, "ask", "--title", "T")
    assert (refused.returncode, refused.stderr.splitlines()) == (
        2, ["Error: give at least one --choice ID=LABEL or --text-choice"])


def test_demo_options_of_another_mode_are_refused_not_ignored(home: Path) -> None:
    for args, line in ((["--port", "8443"], "Error: --port only applies with --serve"),
                       (["--press", "Yes", "--token-file", "/x"],
                        "Error: --token-file only applies with --serve"),
                       (["--user", "5"], "Error: --user only applies with --press or --reply")):
        result = cli(home, "demo", *args)
        assert (result.returncode, result.stdout, result.stderr.splitlines()) == (2, "", [line])
