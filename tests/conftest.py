"""Shared fixtures: every test gets its own HOME, so state.sqlite is a real file under tmp."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from state.clock import CountingEntropy, ManualClock
from state.database import Database

# Under CI=true a skip other than a root-only one fails the run (tests/ci_skips.py).
pytest_plugins = ["tests.ci_skips"]

# CI explores the same examples every run (a red CI names a failure anyone can replay) and
# never fails a property on a loaded machine's timing; HYPOTHESIS_PROFILE=dev explores anew.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# Tests press Ctrl-C as a person at a terminal does. A suite started in the background by a
# shell without job control inherits SIGINT ignored, and so would every child it starts (an
# ignored signal stays ignored across exec): the children would never see the Ctrl-C.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


# -- token secrecy across the whole suite (tests/token_guard.py) ---------------------------

from tests import token_guard  # noqa: E402

_RECORDER = token_guard.Recorder()


def pytest_sessionstart(session: pytest.Session) -> None:
    root = logging.getLogger()
    root.addHandler(_RECORDER)
    root.setLevel(logging.DEBUG)
    token_guard.watch_children()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    logging.getLogger().removeHandler(_RECORDER)
    leaks = [*_RECORDER.leaks, *token_guard.CHILD_LEAKS]
    factory = getattr(session.config, "_tmp_path_factory", None)
    base = factory.getbasetemp() if factory is not None else None
    if base is not None and base.exists():
        leaks += token_guard.file_leaks(base)
    if leaks:
        session.exitstatus = 1
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("TOKEN LEAK: " + "; ".join(leaks[:10]), red=True)
