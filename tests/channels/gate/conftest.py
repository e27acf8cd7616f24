"""A HOME with a project, a configuration naming a token file, and the judge bound to them."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from channels.config.errors import ConfigError
from channels.config.gate import DEFAULT_POLICY, GatePolicy
from channels.gate.policy import Judgement, Protected, judge

ON = dataclasses.replace(DEFAULT_POLICY, enabled=True)
OFF = DEFAULT_POLICY

Judge = Callable[..., Judgement]


@pytest.fixture
def project(home: Path) -> Path:
    path = home / "proj"
    (path / "src").mkdir(parents=True)
    (path / "README.md").write_text("# readme\n")
    return path


@pytest.fixture
def config_dir(home: Path) -> Path:
    directory = home / ".config" / "pi-workflows"
    directory.mkdir(parents=True, mode=0o700)
    secrets = home / "secrets"
    secrets.mkdir(mode=0o700)
    (secrets / "bot.token").write_text("1:x\n")
    (directory / "credentials.json").write_text(json.dumps({
        "schema": "pi-workflows.credentials.v1",
        "telegram": {"default": {"tokenFile": str(secrets / "bot.token")}}}))
    return directory


@pytest.fixture
def protected(home: Path, config_dir: Path, project: Path) -> Protected:
    return dataclasses.replace(Protected.discover(home, config_dir, project), pids=(4242, 4243))


@pytest.fixture
def judged(home: Path, project: Path, protected: Protected) -> Judge:
    """judge(policy, tool, input) with this HOME, project and protection."""
    def run(policy: GatePolicy | ConfigError, tool: str, tool_input: Mapping[str, Any],
            cwd: Path | None = None) -> Judgement:
        return judge(policy, tool, tool_input, cwd=cwd or project, home=home,
                     protected=protected)
    return run
