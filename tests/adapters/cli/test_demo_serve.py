"""`piw-channels demo --serve` and `demo --press`: rehearse the whole setup against the bundled
fake Bot API, with only the commands the README gives. Real child processes."""

from __future__ import annotations

import json
import select
import shlex
import signal
import subprocess
from pathlib import Path

from tests.channels.telegram.helpers import CLI
from tests.conftest import child_env
from tests.paths import ROOT


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=ROOT, env=child_env(home), capture_output=True,
                          text=True, timeout=60)


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
        first, rehearse, press = read_lines(serve, 3)
        url = first.split()[3]
        assert first == (f"Fake Bot API: {url} (its token is in {token_file}); Ctrl-C stops"
                         " it.")
        assert token_file.stat().st_mode & 0o777 == 0o600
        assert rehearse.startswith("Rehearse: piw-channels setup telegram ")
        assert press == f"Press a button: piw-channels demo --press LABEL --api-base-url {url}"

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
            2, "Error: no message with buttons on the demo Bot API yet; run: piw-channels"
               " ask ..., then piw-channels poll\n")  # the keyboard was removed on settlement
    finally:
        serve.send_signal(signal.SIGINT)
        _, err = serve.communicate(timeout=30)
    assert (serve.returncode, err) == (0, "")
    assert not token_file.exists()  # the demo token it created is gone again
