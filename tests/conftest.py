"""Shared fixtures: every test gets its own HOME, so state.sqlite is a real file under tmp."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from state.clock import CountingEntropy, ManualClock
from state.database import Database


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private temporary HOME (also used by child processes through the environment)."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("PI_WORKFLOWS_CONFIG_DIR", raising=False)
    return home


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def db(home: Path, clock: ManualClock) -> Iterator[Database]:
    """A writer on a fresh database with a manual clock and deterministic entropy."""
    database = Database.open_writer(clock=clock, entropy=CountingEntropy())
    try:
        yield database
    finally:
        database.close()


def child_env(home: Path) -> dict[str, str]:
    """Environment for a child process that must see the same HOME."""
    env = dict(os.environ)
    env["HOME"] = str(home)
    env.pop("COLUMNS", None)  # tables are fitted to it; a test that wants a width sets it
    return env


# -- token secrecy across the whole suite ----------------------------------------------------
# Every test token has the Bot API shape `<digits>:<secret>`. Log records of every test are
# kept (at DEBUG, all loggers), and at the end of the session every database file and crash
# report the suite (and its child processes) created, and every record, is scanned for
# anything of that shape.

import logging  # noqa: E402
import re  # noqa: E402

TOKEN_SHAPE = re.compile(rb"(?<![A-Za-z0-9_-])[0-9]{5,}:[A-Za-z0-9_-]{20,}")
ANY_TOKEN_SHAPE = re.compile(rb"[0-9]{5,}:[A-Za-z0-9_-]{20,}")  # also right after "bot"


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.leaks: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a broken record must not break the test it came from
            text = str(record.msg)
        if record.exc_text:
            text += record.exc_text
        if TOKEN_SHAPE.search(text.encode("utf-8", "replace")):
            self.leaks.append(f"{record.name}: {text[:200]}")


_RECORDER = _Recorder()


def pytest_sessionstart(session: pytest.Session) -> None:
    root = logging.getLogger()
    root.addHandler(_RECORDER)
    root.setLevel(logging.DEBUG)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    logging.getLogger().removeHandler(_RECORDER)
    leaks = list(_RECORDER.leaks)
    factory = getattr(session.config, "_tmp_path_factory", None)
    base = factory.getbasetemp() if factory is not None else None
    if base is not None and base.exists():
        for path in base.rglob("*.sqlite*"):
            if path.is_file() and TOKEN_SHAPE.search(path.read_bytes()):
                leaks.append(f"database file {path}")
        # The crash reports child processes wrote (a traceback may hold any string).
        for path in base.rglob("piw-channels-crash-*.txt"):
            if path.is_file() and ANY_TOKEN_SHAPE.search(path.read_bytes()):
                leaks.append(f"crash report {path}")
    if leaks:
        session.exitstatus = 1
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("TOKEN LEAK: " + "; ".join(leaks[:10]), red=True)
