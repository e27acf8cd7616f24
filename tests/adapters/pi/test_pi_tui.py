"""Real Pi's terminal UI on a pseudo-terminal: what a person sees of a decision."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

from state.database import Database
from tests.adapters.pi.helpers import ask
from tests.adapters.pi.mock_model import MockModel, call, say, texts_sent
from tests.adapters.pi.rpc import EXTENSION, bridge_command, needs_pi, pi_command, pi_env
from tests.adapters.pi.test_pi_gate import RM, enable_gate

pytestmark = needs_pi
ANSI = re.compile(rb"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|.)")


def test_a_decision_is_labelled_for_people_not_by_its_custom_type(
        home: Path, db: Database, tmp_path: Path) -> None:
    # D13: the TUI showed the raw "[piw-channels-decision]" label.
    ask(db)
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = pi_env(home, bridge_command(tmp_path), TERM="xterm-256color")
    proc = subprocess.Popen(pi_command("--no-session", "--offline", "--no-extensions", "-e",
                                       str(EXTENSION)), cwd=home, env=env, stdin=slave, stdout=slave,
                            stderr=slave, start_new_session=True)
    os.close(slave)
    screen = b""
    try:
        end = time.monotonic() + 30
        while b"Decisionforyou" not in ANSI.sub(b"", screen).replace(b" ", b"") \
                and time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    screen += os.read(master, 65536)
                except OSError:
                    break
        plain = ANSI.sub(b"", screen).decode(errors="replace")
        assert "Decision for you" in plain, plain[-2000:]
        assert "Approve the plan?" in plain
        assert "[piw-channels-decision]" not in plain
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        os.close(master)


class Terminal:
    """Real Pi's TUI on a pseudo-terminal: keys in, the screen's text (ANSI stripped) out."""

    def __init__(self, home: Path, tmp_path: Path) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 140, 0, 0))
        env = pi_env(home, bridge_command(tmp_path), TERM="xterm-256color")
        self.proc = subprocess.Popen(
            pi_command("--no-session", "--offline", "--no-extensions", "-e", str(EXTENSION)),
            cwd=home, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
        self.master = master
        self.screen = b""

    def text(self) -> str:
        return ANSI.sub(b"", self.screen).decode(errors="replace")

    def wait_for(self, words: str, timeout: float = 60) -> str:
        """Read until `words` shows (spaces ignored: the TUI moves the cursor between them)."""
        wanted = words.replace(" ", "")
        end = time.monotonic() + timeout
        while wanted not in self.text().replace(" ", ""):
            if time.monotonic() > end:
                raise AssertionError(f"{words!r} never showed; the screen ends:\n"
                                     f"{self.text()[-3000:]}")
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    self.screen += os.read(self.master, 65536)
                except OSError:
                    break
        return self.text()

    def keys(self, data: str) -> None:
        os.write(self.master, data.encode())

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        os.close(self.master)


def test_a_gated_command_is_put_to_the_person_at_the_terminal_and_runs_once_allowed(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    # The person at the terminal: the agent is about to run `rm -rf build`; the dialog shows
    # the whole command and its choices, Enter allows it once, and then it runs.
    enable_gate(home)
    (home / "build").mkdir()
    model.add(call("bash", command=RM), say("Cleaned."))
    terminal = Terminal(home, tmp_path)
    try:
        terminal.wait_for("mock-1")  # the editor is up (the footer names the model)
        terminal.keys("Clean the build.")
        time.sleep(0.3)  # the editor takes the text before Enter submits it
        terminal.keys("\r")
        # The dialog is drawn in pieces: wait for its last line, then read it whole.
        shown = terminal.wait_for("navigate  enter select")
        for line in ("Pi wants to run a command", "rm -rf build && echo build-removed",
                     "Tool: bash", "Rule that matched: bash: rm -rf", "Project: home",
                     "1. Allow once", "Deny with a reason",
                     "Allow this exact command for this session"):
            assert line in shown, line
        # A readable deadline, not the contract's ISO timestamp.
        assert re.search(r"Answer by \w{3} \d{1,2} \w{3} \d\d:\d\d UTC; then: Deny", shown)
        assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", shown)
        terminal.keys("\r")  # the first choice: Allow once
        terminal.wait_for("Cleaned.")
    finally:
        terminal.close()
    assert not (home / "build").exists()
    assert "[Allowed in Pi]\nbuild-removed\n" in texts_sent(model.requests[-1])
    assert db.conn.execute(
        "SELECT outcome, channel FROM human_decision_resolutions").fetchall() == [
            ("accepted", "pi")]
