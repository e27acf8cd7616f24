"""Real Pi in RPC mode for tests: the client, the `piw-channels` it spawns, and helpers.

The test is the RPC client and plays the person answering Pi's dialogs. Needs Node and
`@mariozechner/pi-coding-agent@0.73.1`; `PIW_PI_BIN` names its `pi` executable (or `pi` is on
PATH), otherwise the tests that use it are skipped (under CI=true they fail). `PIW_PI_NODE`
names the Node that runs Pi (default: the `node` on PATH, as Pi's own launcher does); Node 22
and later keep Pi's compiled code in a cache shared by the run (`NODE_COMPILE_CACHE`), which
makes each of the suite's Pi starts about 40% cheaper.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.paths import ROOT

EXTENSION = ROOT / "adapters" / "pi" / "extension" / "piw-channels.ts"
# A test-only extension: `/test-reload` reloads extensions as Pi's own `/reload` does (RPC mode
# has no built-in slash commands).
RELOAD_EXTENSION = Path(__file__).with_name("reload-ext.ts")
# Test-only: the tool `test_clock_advance` moves Pi's clock ahead (a long turn, no waiting).
CLOCK_EXTENSION = Path(__file__).with_name("clock-ext.ts")
CUSTOM_TYPE = "piw-channels-decision"
TURN_TYPE = "piw-channels-answer"
SETTLED_TYPE = "piw-channels-settled"


def pi_executable() -> str | None:
    found = os.environ.get("PIW_PI_BIN") or shutil.which("pi")
    if found is None or shutil.which("node") is None:
        return None
    return found


PI = pi_executable()
PI_NODE = os.environ.get("PIW_PI_NODE") or None
# Node ignores a cache it does not support (Node 20); one directory for the whole run.
_COMPILE_CACHE = {"NODE_COMPILE_CACHE": os.environ.get("NODE_COMPILE_CACHE") or os.path.join(
    tempfile.gettempdir(), f"piw-tests-node-cache-{os.getuid()}")}


def pi_command(*args: str, node: str | None = PI_NODE) -> list[str]:
    """The argv that starts real Pi with `args` (`node` None: the `node` on PATH)."""
    assert PI is not None, "real Pi is not installed (PIW_PI_BIN)"
    return [*([node] if node else []), PI, *args]


def pi_env(home: Path, bridge_bin: Path, **extra: str) -> dict[str, str]:
    """The environment of a Pi child: its HOME and agent directory, the bridge it spawns."""
    return {**os.environ, **_COMPILE_CACHE, "HOME": str(home),
            "PI_CODING_AGENT_DIR": str(home / ".pi/agent"), "PIW_CHANNELS_BIN": str(bridge_bin),
            **extra}
# Under CI=true a missing Pi fails these tests (their first step needs it) instead of skipping.
CI = os.environ.get("CI") == "true"
needs_pi = pytest.mark.skipif(
    PI is None and not CI, reason="real Pi not available: install "
    "@mariozechner/pi-coding-agent@0.73.1 with npm and set PIW_PI_BIN to its pi executable (Node >= 20.6 needed)")


class RpcClient:
    """Pi in RPC mode: strict JSON lines on its stdin and stdout."""

    def __init__(self, home: Path, bridge_bin: Path, *, session: Sequence[str] = ("--no-session",),
                 offline: bool = True, extra_env: dict[str, str] | None = None,
                 extensions: Sequence[Path] = (), cwd: Path | None = None,
                 node: str | None = PI_NODE) -> None:
        env = pi_env(home, bridge_bin, **(extra_env or {}))
        argv = pi_command("--mode", "rpc", *session, *(["--offline"] if offline else []),
                          "--no-extensions", "-e", str(EXTENSION), "-e", str(RELOAD_EXTENSION),
                          *[arg for path in extensions for arg in ("-e", str(path))], node=node)
        self.proc = subprocess.Popen(argv, cwd=cwd or home, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._buffer = b""
        self.seen: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def next(self, timeout: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\n", 1)
        message = dict(json.loads(raw.rstrip(b"\r")))
        self.seen.append(message)
        return message

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], what: str,
                 timeout: float = 60) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            message = self.next(end - time.monotonic())
            if message is not None and predicate(message):
                return message
            if message is None and self.proc.poll() is not None:
                break
        raise AssertionError(f"no {what}; saw {[_brief(m) for m in self.seen[-15:]]}")

    def quiet(self, predicate: Callable[[dict[str, Any]], bool], seconds: float) -> None:
        """Read for `seconds`; fail if a matching message shows up."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            message = self.next(end - time.monotonic())
            if message is not None and predicate(message):
                raise AssertionError(f"unexpected {message}")

    def answer_dialog(self, method: str, value: str) -> dict[str, Any]:
        request = self.wait_for(lambda m: m.get("type") == "extension_ui_request"
                                and m.get("method") == method, f"{method} dialog")
        self.send({"type": "extension_ui_response", "id": request["id"], "value": value})
        return request

    def session_id(self) -> str:
        self.send({"id": "state", "type": "get_state"})
        state = self.wait_for(lambda m: m.get("id") == "state", "get_state response")
        return str(state["data"]["sessionId"])

    def close(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()


def _brief(message: dict[str, Any]) -> str:
    """A message in a few words, for failure output."""
    kind = str(message.get("type"))
    if kind == "extension_ui_request":
        return f"ui:{message.get('method')}:{str(message.get('message') or message.get('title'))[:80]}"
    if kind in ("message_start", "message_end"):
        inner = message.get("message", {})
        return f"{kind}:{inner.get('role')}:{inner.get('customType', '')}"
    if kind == "response":
        return f"response:{message.get('command')}:{message.get('success')}:{message.get('error')}"
    return kind


def bridge_command(tmp_path: Path, *, before: str = "") -> Path:
    """What the extension runs as `piw-channels`: this checkout with this interpreter
    (`before` is shell run first, for tests that break the bridge on purpose)."""
    script = tmp_path / "piw-channels"
    script.write_text(f'#!/bin/sh\n{before}\ncd {ROOT}\nexec {sys.executable} -c '
                      f'"from adapters.cli.main import main; main()" "$@"\n')
    script.chmod(0o755)
    return script


def project(home: Path) -> Path:
    """A project directory in `home`, where a person would start Pi."""
    path = home / "project"
    path.mkdir(exist_ok=True)
    return path


def wait_until(check: Callable[[], bool], what: str, timeout: float = 15) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def is_notice(text: str) -> Callable[[dict[str, Any]], bool]:
    """A `notify` dialog request whose message contains `text`."""
    return lambda m: m.get("method") == "notify" and text in str(m.get("message"))


def is_shown(decision_id: str) -> Callable[[dict[str, Any]], bool]:
    """The message that shows a decision in the session."""
    return lambda m: (m.get("type") == "message_end"
                      and m["message"].get("customType") == CUSTOM_TYPE
                      and m["message"]["details"].get("decisionId") == decision_id)
