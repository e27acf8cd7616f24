"""The fake out of process: ``python -m adapters.telegram.fake`` and a handle on that child.

The child prints its base URL as the first stdout line and is then driven
through ``/_control/`` (``RemoteFakeBotApi``); it outlives a SIGKILLed worker.
"""

from __future__ import annotations

import argparse
import contextlib
import select
import signal
import subprocess
import sys
import urllib.error
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from adapters.telegram.errors import FixtureError
from adapters.telegram.fake.control import RemoteFakeBotApi
from adapters.telegram.fake.server import FakeBotApi

__all__ = ["FakeBotApiProcess", "main"]


_MODULE = "adapters.telegram.fake"


class FakeBotApiProcess:
    """Runs the fake in a child process, so it outlives a SIGKILLed worker."""

    def __init__(
        self,
        token_file: str | Path,
        *,
        fixtures_dir: str | Path | None = None,
        push: Sequence[str] = (),
        python: str = sys.executable,
        start_timeout: float = 10.0,
    ) -> None:
        self._argv = [python, "-m", _MODULE, "--port", "0"]
        self._argv += ["--token-file", str(token_file)]
        if fixtures_dir is not None:
            self._argv += ["--fixtures", str(fixtures_dir)]
        for name in push:
            self._argv += ["--push", name]
        self._start_timeout = start_timeout
        self._process: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        self.stop()

    @property
    def pid(self) -> int:
        """The child's process id."""
        if self._process is None:
            raise RuntimeError("the fake Bot API process is not running")
        return self._process.pid

    @property
    def control(self) -> RemoteFakeBotApi:
        """A control client for the child."""
        return RemoteFakeBotApi(self.base_url)

    def start(self) -> str:
        """Start the child and return its base URL (its first stdout line)."""
        self._process = subprocess.Popen(self._argv, stdout=subprocess.PIPE, text=True)
        stdout = self._process.stdout
        assert stdout is not None  # PIPE was requested
        ready, _, _ = select.select([stdout], [], [], self._start_timeout)
        line = stdout.readline().strip() if ready else ""
        if not line.startswith("http://"):
            self.stop()
            raise RuntimeError("the fake Bot API process did not report its URL")
        self.base_url = line
        return line

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the child to shut down; kill it if it does not."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None and self.base_url:
            with contextlib.suppress(OSError, urllib.error.URLError):
                RemoteFakeBotApi(self.base_url, timeout=timeout).shutdown()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=f"python -m {_MODULE}",
        description="Loopback fake Telegram Bot API. Prints its base URL on the first line.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (loopback)")
    parser.add_argument("--port", type=int, default=0, help="port; 0 picks a free one")
    parser.add_argument("--token-file", required=True, help="file holding the bot token")
    parser.add_argument("--fixtures", help="directory of fixture files for push_fixture")
    parser.add_argument(
        "--push", action="append", default=[], metavar="NAME",
        help="fixture to queue at start (repeatable)",
    )  # fmt: skip
    return parser.parse_args(argv)


def _interrupt(signum: int, frame: object) -> None:
    # Closing from inside a signal handler could deadlock on a lock the main
    # thread holds; unwind the main loop instead.
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fake until SIGTERM/SIGINT or ``POST /_control/shutdown``."""
    args = _parse_args(argv)
    try:
        token = Path(args.token_file).read_text(encoding="utf-8").strip()
    except OSError as exc:
        print(f"Error: cannot read the token file: {exc.strerror}", file=sys.stderr)
        return 2
    if not token:
        print("Error: the token file is empty", file=sys.stderr)
        return 2
    server = FakeBotApi(token, host=args.host, port=args.port, fixtures_dir=args.fixtures)
    server.start()
    try:
        for name in args.push:
            server.push_fixture(name)
    except FixtureError as exc:
        server.close()
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    print(server.base_url, flush=True)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        while not server.wait_closed(0.2):
            pass
    except KeyboardInterrupt:
        server.close()
    return 0
