"""The bot token never leaves its file: not into the database, logs, outputs, exceptions,
argv or a child's environment (ARCHITECTURE section 7).

One representative flow runs against a loopback fake Bot API with every logger at DEBUG, in
this process and in child processes (whose DEBUG logs go to their stderr): setup, delivery
through a 429, a getUpdates that is not JSON, a dropped connection, a server that echoes the
request URL in an error, a 409 conflict, a wrong token (401), a token file with open
permissions and a malformed token. Then every byte written under HOME (database, WAL, config)
and everything captured is searched for the token and for its secret part.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from adapters.telegram.client import TelegramClient
from adapters.telegram.errors import InvalidTokenFormat
from adapters.telegram.fake import BotError, FakeBotApi, Fault, FaultKind
from channels.config.errors import ConfigPermission
from channels.config.loading import load_config
from state.database import Database
from tests.channels.telegram.helpers import (
    PROFILE,
    ROOT,
    TOKEN,
    USER,
    configure_telegram_profile,
    effect_statuses,
    finish,
    message_parts,
    open_decision,
    poll_in_process,
    press_button,
    reap,
    resolutions,
    token_secret,
    wait_until,
    write_token_file,
)
from tests.conftest import child_env

WRONG_TOKEN = "7123456789:AAG-revokedSecret_Vn5Qw2Lp8Zx4Rt6Yb1Kc"
# A child with every logger at DEBUG, on stderr (so the test can read what it logged).
LOGGING_CHILD = (
    "import logging, sys\n"
    "logging.basicConfig(level=logging.DEBUG, format='%(name)s %(levelname)s %(message)s')\n"
    "from adapters.cli.main import run\n"
    "sys.exit(run(sys.argv[1:]))\n"
)


class _Capture(logging.Handler):
    """Keeps the fully formatted text of every record (message, exception, stack)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def all_logs() -> Iterator[_Capture]:
    """Every logger's records at DEBUG, for the duration of the test."""
    capture = _Capture()
    root = logging.getLogger()
    saved = root.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    try:
        yield capture
    finally:
        root.removeHandler(capture)
        root.setLevel(saved)


class _Flow:
    """Runs CLI children and keeps everything they were given and printed."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.argvs: list[list[str]] = []
        self.outputs: list[str] = []

    def argv(self, *args: str) -> list[str]:
        argv = [sys.executable, "-c", LOGGING_CHILD, *args]
        self.argvs.append(argv)
        return argv

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(self.argv(*args), cwd=ROOT, env=child_env(self.home),
                                capture_output=True, text=True, timeout=60)
        self.outputs += [result.stdout, result.stderr]
        return result

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(*args), cwd=ROOT, env=child_env(self.home),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _needles() -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for name, token in (("token", TOKEN), ("wrong token", WRONG_TOKEN)):
        found[name] = token.encode()
        found[f"{name} secret"] = token_secret(token).encode()
        found[f"{name} quoted"] = quote(token, safe="").encode()
    return found


def _leaks(where: str, data: bytes | str) -> list[str]:
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    return [f"{name} in {where}" for name, needle in _needles().items() if needle in raw]


def _exception_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc) + str(exc)


def test_the_token_never_reaches_the_database_logs_outputs_exceptions_or_argv(
    home: Path, all_logs: _Capture,
) -> None:
    flow = _Flow(home)
    texts: list[str] = []  # exception texts, reports and reprs produced in this process
    token_file = write_token_file(home)
    with contextlib.ExitStack() as stack:
        fake = stack.enter_context(FakeBotApi(TOKEN))
        # Setup verifies the token with getMe and installs the profile.
        setup = flow.run("setup", "telegram", "--token-file", str(token_file), "--user",
                         str(USER), "--chat", str(USER), "--profile", PROFILE,
                         "--api-base-url", fake.base_url)
        assert setup.returncode == 0, setup.stderr
        assert [r.token_ok for r in fake.requests("getMe")] == [True]

        with Database.open_writer() as db:
            first = open_decision(db, title="Approve plan one?")
        # An open connection keeps the -wal file (the last one to close would remove it), so
        # the log of every write is still there to be searched at the end.
        watcher = Database.open_reader()
        stack.callback(watcher.close)

        # Delivery through a 429 (retried after retry_after), then a getUpdates that is not JSON.
        fake.inject("sendMessage", Fault.too_many_requests(1))
        fake.inject("getUpdates", Fault.non_json())
        assert flow.run("poll", "--once").returncode == 75  # a batch it cannot read: refused
        assert [r.status for r in fake.requests("sendMessage")] == [429, 200]
        assert all(p.message_ref is not None for p in message_parts(first.decision_id))

        # A press; its answerCallbackQuery loses the connection (ambiguous, never repeated).
        ref = int(message_parts(first.decision_id)[-1].message_ref or 0)
        press_button(fake, first, "continue", ref)
        fake.inject("answerCallbackQuery", Fault.drop())
        assert flow.run("poll", "--once").returncode == 0
        assert [r[:2] for r in resolutions(first.decision_id)] == [("accepted", "human")]

        # A server (or proxy) that echoes the request URL, token included, in its error.
        fake.inject("getUpdates", Fault.error(400, f"Bad Request: POST /bot{TOKEN}/getUpdates"))
        assert flow.run("poll", "--once").returncode == 0
        status = flow.run("status", "--json")
        assert "<redacted>" in status.stdout  # the echoed description was kept, scrubbed

        # 409: another poller holds the bot; the poll stops and says so.
        fake.inject("getUpdates", Fault.canned(BotError.CONFLICT))
        conflict = flow.run("poll", "--once")
        assert conflict.returncode == 75 and "another getUpdates poller" in conflict.stderr

        # In this process: a dropped sendMessage (the delivery becomes ambiguous).
        fake.inject("sendMessage", Fault.drop())
        with Database.open_writer() as db:
            second = open_decision(db, title="Approve plan two?")
            texts += [repr(r) for r in poll_in_process(db)]
        assert effect_statuses(second.decision_id, "telegram.deliver") == ["ambiguous"]

        # A wrong (revoked) token: 401, in a child and in this process.
        write_token_file(home, WRONG_TOKEN)
        flow.run("poll", "--once")  # its exit code is not this test's concern
        with Database.open_writer() as db:
            texts += [repr(r) for r in poll_in_process(db)]
        assert [r.token_ok for r in fake.requests("getUpdates")][-2:] == [False, False]
        assert '"code": 401' in flow.run("status", "--json").stdout

        # A token file others can read is refused, naming the file, never its content.
        token_file.chmod(0o644)
        refused = flow.run("poll", "--once")
        # 78: the refused token is not disproved (no getUpdates could run), and it outranks
        # the unreadable file's 77, which the line names.
        assert refused.returncode == 78 and str(token_file) in refused.stderr
        with pytest.raises(ConfigPermission, match="chmod 600") as open_file:
            load_config()
        texts.append(_exception_text(open_file.value))
        token_file.chmod(0o600)

        # A malformed token (trailing junk) is refused before any request is made.
        requests_before = len(fake.requests())
        token_file.write_text(f"{TOKEN} trailing-junk\n")
        malformed = flow.run("poll", "--once")
        assert malformed.returncode != 0 and "Error:" in malformed.stderr
        assert len(fake.requests()) == requests_before
        with pytest.raises(InvalidTokenFormat) as bad_format:
            TelegramClient(f"{TOKEN} trailing-junk", api_base_url=fake.base_url)
        texts.append(_exception_text(bad_format.value))

        # A running poller: neither its command line nor its environment holds the token.
        write_token_file(home, TOKEN)
        poller = flow.start("poll", "--for", "3")
        try:
            requests_before = len(fake.requests("getUpdates"))
            wait_until(lambda: len(fake.requests("getUpdates")) > requests_before,
                       "the poller's getUpdates")
            cmdline = Path(f"/proc/{poller.pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{poller.pid}/environ").read_bytes()
            code, out, err = finish(poller)
        finally:
            reap(poller)
        assert code == 75  # the second decision's delivery is still ambiguous
        flow.outputs += [out, err]
        assert b"poll" in cmdline and b"HOME=" in environ
        texts.append(repr(TelegramClient(TOKEN, api_base_url=fake.base_url)))

        # The captures are not empty: URL-logging loggers (httpx) ran here and in the children.
        assert any("HTTP Request: POST" in line and "/bot<redacted>/" in line
                   for line in all_logs.lines)
        assert any("HTTP Request: POST" in out for out in flow.outputs)

        leaks = _leaks("/proc cmdline", cmdline) + _leaks("/proc environ", environ)
        leaks += [leak for argv in flow.argvs
                  for leak in _leaks(f"argv {argv[3:]}", " ".join(argv))]
        leaks += [leak for line in all_logs.lines for leak in _leaks("a log record", line)]
        leaks += [leak for out in flow.outputs for leak in _leaks("child output", out)]
        leaks += [leak for text in texts for leak in _leaks("an exception or report", text)]
        written = [p for p in home.rglob("*") if p.is_file() and p.name != token_file.name]
        names = {p.name for p in written}
        assert {"state.sqlite", "state.sqlite-wal", "channels.json",
                "credentials.json"} <= names, names
        leaks += [leak for p in written
                  for leak in _leaks(str(p.relative_to(home)), p.read_bytes())]
        assert leaks == []


def _json_escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


ECHOES = {  # how a provider (or a proxy in front of it) might echo the token in an error
    "raw": f"Bad Request: POST /bot{TOKEN}/getUpdates",
    "JSON-escaped": f"Bad Request: bot {_json_escaped(TOKEN)} is unknown",
    "URL-quoted": f"Not Found: /bot{quote(TOKEN, safe='')}/getUpdates",
    "URL-quoted, lower case": f"Not Found: /bot{TOKEN.replace(':', '%3a')}/getUpdates",
    "secret part only": f"Unauthorized: secret {token_secret()} was revoked",
    "escaped secret part only": f"Unauthorized: secret {_json_escaped(token_secret())}",
}


def _echo_fault(description: str, status: int = 400) -> Fault:
    body = f'{{"ok":false,"error_code":{status},"description":"{description}"}}'
    return Fault(FaultKind.RESPOND, status=status, body=body.encode("ascii"))


def test_a_provider_text_echoing_the_token_in_any_encoding_is_scrubbed_everywhere(
    home: Path,
) -> None:
    flow = _Flow(home)
    with FakeBotApi(TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        watcher = None
        try:
            for name, description in ECHOES.items():
                fake.inject("getUpdates", _echo_fault(description))
                flow.run("poll", "--once")
                if watcher is None:  # keeps the -wal file, so every write stays searchable
                    watcher = Database.open_reader()
                status = flow.run("status", "--json")
                assert "<redacted>" in status.stdout, (name, status.stdout)
            fake.inject("sendMessage", _echo_fault(ECHOES["escaped secret part only"], 403))
            with Database.open_writer() as db:
                handle = open_decision(db)
            flow.run("poll", "--once")
            assert effect_statuses(handle.decision_id, "telegram.deliver") == ["rejected"]
            shown = flow.run("status")
            leaks = [leak for out in flow.outputs for leak in _leaks("child output", out)]
            leaks += [leak for p in home.rglob("state.sqlite*")
                      for leak in _leaks(p.name, p.read_bytes())]
        finally:
            if watcher is not None:
                watcher.close()
    assert shown.returncode == 78  # the health check: a recipient refused the delivery
    assert leaks == []
