"""`piw-channels demo --serve` and `demo --press`: rehearse the whole setup against the bundled
fake Bot API, with only the commands the README gives. Real child processes."""

from __future__ import annotations

import json
import select
import shlex
import signal
import socket
import subprocess
from pathlib import Path

from adapters.cli.demo import first_update_id
from tests.channels.telegram.helpers import CLI
from tests.cli import piw
from tests.conftest import child_env
from tests.paths import ROOT

HEADER_LINES = 5  # what demo --serve prints before the chat transcript


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return piw(home, *args)


def read_lines(proc: subprocess.Popen[str], count: int) -> list[str]:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 20)
    assert ready, "demo --serve printed nothing"
    return [proc.stdout.readline().rstrip("\n") for _ in range(count)]


def test_a_rehearsal_against_demo_serve_goes_from_setup_to_an_answer(home: Path) -> None:
    token_file = home / "rehearsal.token"
    serve = subprocess.Popen([*CLI, "demo", "--serve", "--token-file", str(token_file)],
                             cwd=ROOT, env=child_env(home), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        first, rehearse, press, reply, chat = read_lines(serve, HEADER_LINES)
        url = first.split()[3]
        assert first == (f"Fake Bot API: {url} (its token is in {token_file}); Ctrl-C stops"
                         " it.")
        assert token_file.stat().st_mode & 0o777 == 0o600
        assert rehearse.startswith("Rehearse: piw-channels setup telegram ")
        assert press == f"Press a button: piw-channels demo --press LABEL --api-base-url {url}"
        assert reply == f"Type a reply: piw-channels demo --reply TEXT --api-base-url {url}"
        assert chat == "The chat, as the person sees it:"

        setup = cli(home, *shlex.split(rehearse.removeprefix("Rehearse: piw-channels ")))
        assert setup.returncode == 0, setup.stderr
        decision_id = cli(home, "ask", "--title", "Ship it?", "--choice", "yes=Yes",
                          "--choice", "no=No").stdout.strip()
        assert cli(home, "poll").returncode == 0  # delivered to the fake
        pressed = cli(home, *shlex.split(press.removeprefix("Press a button: piw-channels ")
                                         .replace("LABEL", "yes")))
        assert (pressed.returncode, pressed.stdout) == (
            0, "pressed 'Yes'; run piw-channels poll to collect it\n")
        assert cli(home, "poll").returncode == 0
        [decision] = json.loads(cli(home, "decisions", "--all", "--json").stdout)
        assert (decision["decision_id"], decision["choice"], decision["channel"]) == (
            decision_id, "yes", "telegram:default")
        missing = cli(home, "demo", "--press", "Maybe", "--api-base-url", url)
        assert (missing.returncode, missing.stderr) == (
            2, "Error: no message on the demo Bot API shows buttons to answer (a decided"
               " one's are marked and inert); run: piw-channels ask ..., then piw-channels poll\n")
    finally:
        serve.send_signal(signal.SIGINT)
        _, err = serve.communicate(timeout=30)
    assert (serve.returncode, err) == (130, "")  # Ctrl-C, as the exit-code table says
    assert not token_file.exists()  # the demo token it created is gone again


def start_serve(home: Path, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
    serve = subprocess.Popen([*CLI, "demo", "--serve", *args], cwd=ROOT, env=child_env(home),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return serve, read_lines(serve, HEADER_LINES)


def stop(serve: subprocess.Popen[str]) -> None:
    serve.send_signal(signal.SIGTERM)
    serve.communicate(timeout=30)
    assert serve.returncode == 143


def ask_poll_press(home: Path, url: str, title: str) -> str:
    decision_id = cli(home, "ask", "--title", title, "--choice", "yes=Yes").stdout.strip()
    assert cli(home, "poll").returncode == 0
    assert cli(home, "demo", "--press", "Yes", "--api-base-url", url).returncode == 0
    assert cli(home, "poll").returncode == 0
    return decision_id


def test_a_restarted_demo_serve_still_delivers_presses(home: Path) -> None:
    # Its update ids start again above the last run's, so the cursor the first rehearsal left
    # does not swallow the presses of the second.
    token_file = home / "rehearsal.token"
    serve, (first, rehearse, *_) = start_serve(home, "--token-file", str(token_file))
    url = first.split()[3]
    port = url.rsplit(":", 1)[1]
    try:
        assert cli(home, *shlex.split(rehearse.removeprefix("Rehearse: piw-channels "))
                   ).returncode == 0
        one = ask_poll_press(home, url, "First?")
    finally:
        stop(serve)
    serve, _ = start_serve(home, "--token-file", str(token_file), "--port", port)
    try:
        two = ask_poll_press(home, url, "Second?")
    finally:
        stop(serve)
    listing = {d["decision_id"]: d for d in json.loads(
        cli(home, "decisions", "--all", "--json").stdout)}
    assert (listing[one]["choice"], listing[two]["choice"]) == ("yes", "yes")


def test_a_serve_restarted_within_the_second_starts_above_the_last_runs_ids() -> None:
    # The defect: ids began at the whole second, so a first run that handed out five updates
    # within a second left the cursor above the next run's first ids, and a press was dropped.
    started, restarted = 1_700_000_000.2, 1_700_000_000.9
    last_of_first_run = first_update_id(started) + 4  # five updates, each a round trip
    assert first_update_id(restarted) > last_of_first_run


def test_demo_serve_on_a_busy_port_is_one_line_and_a_usage_error(home: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli(home, "demo", "--serve", "--port", str(port))
    assert (done.returncode, done.stdout) == (2, ""), done
    [line] = done.stderr.splitlines()
    assert line.startswith(f"Error: cannot serve on 127.0.0.1:{port}: "), line
    assert "choose another --port" in line, line
    assert not (home / "piw-demo.token").exists()  # the token file it made is gone again
    assert not list(home.rglob("piw-channels-crash-*"))  # not a bug: no crash report
