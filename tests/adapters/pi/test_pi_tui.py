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
from tests.adapters.pi.rpc import EXTENSION, PI, bridge_command, needs_pi

pytestmark = needs_pi
ANSI = re.compile(rb"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|.)")


def test_a_decision_is_labelled_for_people_not_by_its_custom_type(
        home: Path, db: Database, tmp_path: Path) -> None:
    # D13: the TUI showed the raw "[piw-channels-decision]" label.
    ask(db)
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / ".pi/agent"),
           "PIW_CHANNELS_BIN": str(bridge_command(tmp_path)), "TERM": "xterm-256color"}
    assert PI is not None
    proc = subprocess.Popen([PI, "--no-session", "--offline", "--no-extensions", "-e",
                             str(EXTENSION)], cwd=home, env=env, stdin=slave, stdout=slave,
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
