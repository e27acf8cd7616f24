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
    return env
