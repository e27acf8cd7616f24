"""Fixtures of the real-Pi tests: the scripted mock model, with Pi's agent directory pointing
at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters.pi.mock_model import MockModel


@pytest.fixture
def model(home: Path) -> Iterator[MockModel]:
    server = MockModel([])
    server.write_agent_dir(home / ".pi" / "agent")
    try:
        yield server
    finally:
        server.close()
