"""Shared builders for Pi channel tests: decisions, config, a pty-driven CLI, a bridge process."""

from __future__ import annotations

import json
import os
import re
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from channels.config.install import install_telegram_profile
from channels.decisions import workflows
from channels.decisions.choices import text_input
from state.database import Database
from tests.cli import CLI, piw
from tests.conftest import child_env
from tests.paths import ROOT

# The child becomes a session leader whose controlling terminal is the pty on its stdin, so
# that `/dev/tty` opens exactly as it does for a person in a terminal.
TTY_CLI = [sys.executable, "-c",
           "import fcntl, os, termios; os.setsid(); fcntl.ioctl(0, termios.TIOCSCTTY, 0);"
           " from adapters.cli.main import main; main()"]
SESSION = "0b6f7a52-9c1e-4c55-8f6e-2f4b1c9d7e10"
ANSI = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]")

CHOICES: dict[str, Any] = {
    "continue": {"label": "Continue"},
    "replan": {"label": "Replan", "input": text_input("text", "What should change?", 1, 20)},
    "stop": {"label": "Stop"},
}


def ask(db: Database, title: str = "Approve the plan?", *, audience: str = "operator",
        timeout_ms: int | None = None) -> workflows.AskHandle:
    """An open decision whose run lease is released (as `piw-channels ask` leaves it)."""
    spec = workflows.AskSpec(
        title=title, presentation=workflows.presentation_for(title, "Review it.", None),
        choices=CHOICES, audience=audience, timeout_ms=timeout_ms)
    handle = workflows.create_ask(db, spec, "owner-1")
    workflows.release_run(db, handle.run.lease)
    return handle


def route_to_telegram(home: Path, *, pi_too: bool = True) -> None:
    """Private config: audience `operator` -> pi (optionally) and telegram:default."""
    config_dir = home / ".config" / "pi-workflows"
    token = home / "telegram.token"
    token.write_text("7000000001:AAH-fakeTokenForPiTests_abcdefghijk\n")
    token.chmod(0o600)
    install_telegram_profile(config_dir, token_file=token, user_ids=["42"], chat_ids=["42"])
    if not pi_too:
        path = config_dir / "channels.json"
        document = json.loads(path.read_text())
        document["audiences"]["operator"]["channels"] = ["telegram:default"]
        path.write_text(json.dumps(document))


def cli(home: Path, *args: str, stdin: int | None = subprocess.DEVNULL,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the CLI with no terminal: in this process (stdin and stdout are not terminals:
    tests.cli) or, for another stdin, in a child in its own session."""
    if stdin == subprocess.DEVNULL:
        return piw(home, *args)
    return subprocess.run([*CLI, *args], cwd=ROOT, env=child_env(home), stdin=stdin,
                          capture_output=True, text=True, timeout=timeout,
                          start_new_session=True)


def count(db: Database, sql: str, *params: object) -> int:
    return int(db.conn.execute(sql, params).get)


class PtyCli:
    """The CLI on a pseudo-terminal, driven like a person would: read the screen, type keys."""

    def __init__(self, home: Path, *args: str, controlling: bool = True) -> None:
        master, slave = os.openpty()
        argv = [*(TTY_CLI if controlling else CLI), *args]
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=child_env(home), stdin=slave,
                                     stdout=slave, stderr=slave, start_new_session=not controlling)
        os.close(slave)
        self.master = master
        self.screen = b""
        self._mark = 0

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every slave descriptor is closed (the child exited)
            return False
        self.screen += data
        return bool(data)

    def expect(self, text: str, timeout: float = 20) -> str:
        """Wait until `text` appears after the previous match; return what came before it."""
        wanted = text.encode()
        end = time.monotonic() + timeout
        while wanted not in self.screen[self._mark:]:
            if time.monotonic() > end or not self._read(0.1):
                raise AssertionError(f"{text!r} not seen; screen: {self.plain()!r}")
        at = self.screen.index(wanted, self._mark)
        before = self.screen[self._mark:at]
        self._mark = at + len(wanted)
        return ANSI.sub(b"", before).decode(errors="replace")

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def finish(self, timeout: float = 30) -> int:
        """Read to the end and return the exit code."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and self._read(0.1):
            pass
        code = self.proc.wait(timeout=max(1.0, end - time.monotonic()))
        os.close(self.master)
        return code

    def plain(self) -> str:
        return ANSI.sub(b"", self.screen).decode(errors="replace")


class BridgeProcess:
    """A real `piw-channels pi bridge` child with pipes, read line by line."""

    def __init__(self, home: Path, *, tick: float = 0.05, secret: str | None = None,
                 window: bool = False) -> None:
        # As the extension does: a socket pair made by this process (the bridge's parent),
        # carrying a secret that `hello` repeats (added to every hello sent through `send`,
        # with `session_file` null unless the test gives one).
        self.secret = secret or os.urandom(32).hex()
        ours, theirs = socket.socketpair()
        read_end, self.secret_pipe = theirs.detach(), ours.detach()
        self.proc = subprocess.Popen(
            [*CLI, "pi", "bridge", "--tick", str(tick), "--secret-fd", str(read_end)], cwd=ROOT,
            # `window`: as started by the extension, with this process as its Pi window.
            env={**child_env(home), **({"PIW_PI_WINDOW": str(os.getpid())} if window else {})},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, pass_fds=(read_end,))
        os.close(read_end)
        os.write(self.secret_pipe, self.secret.encode() + b"\n")
        self._buffer = b""
        self.lines: list[bytes] = []  # every raw line received, LF included

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        if message.get("type") == "hello":
            # Like a `--no-session` Pi: no session file (a test names one to check it).
            message = {"secret": self.secret, "session_file": None, **message}
        # JSON.stringify's form: compact, non-ASCII raw.
        self.send_raw(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
                      + b"\n")

    def read(self, timeout: float = 15) -> dict[str, Any] | None:
        """The next message, or None when stdout closed or nothing came in time."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = end - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\n", 1)
        self.lines.append(raw + b"\n")
        return dict(json.loads(raw))

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def _close_secret(self) -> None:
        if self.secret_pipe >= 0:
            os.close(self.secret_pipe)
            self.secret_pipe = -1

    def wait(self, timeout: float = 15) -> int:
        code = self.proc.wait(timeout=timeout)
        self._close_secret()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=15)
        self._close_secret()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
