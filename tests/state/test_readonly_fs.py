"""A read-only file system gets a clear permission error (exit 77), and nothing is written."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import child_env
from tests.paths import ROOT


def _can_mount_read_only(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    result = subprocess.run(
        ["unshare", "-m", "sh", "-c",
         f"mount --bind {probe} {probe} && mount -o remount,ro,bind {probe}"],
        capture_output=True, timeout=30)
    return result.returncode == 0


def _cli_read_only(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a private mount namespace where HOME is a read-only bind mount."""
    command = " ".join([sys.executable, "-c", "'from adapters.cli.main import main; main()'", *args])
    script = f"mount --bind {home} {home} && mount -o remount,ro,bind {home} && {command}"
    return subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=ROOT, env=child_env(home),
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def read_only_ok(tmp_path: Path) -> None:
    if not _can_mount_read_only(tmp_path):
        pytest.skip("this machine does not allow a private read-only mount (unshare -m)")


@pytest.mark.usefixtures("read_only_ok")
def test_creating_the_database_on_a_read_only_file_system_exits_77(home: Path) -> None:
    result = _cli_read_only(home, "init")
    assert result.returncode == 77
    assert "the file system is read-only" in result.stderr
    assert not (home / ".pi").exists()


@pytest.mark.usefixtures("read_only_ok")
@pytest.mark.parametrize("command", ["init", "status", "ask --title t --choice a=A"])
def test_an_existing_database_on_a_read_only_file_system_exits_77_unchanged(
    home: Path, command: str
) -> None:
    subprocess.run([sys.executable, "-c", "from adapters.cli.main import main; main()", "init"],
                   cwd=ROOT, env=child_env(home), check=True, capture_output=True, timeout=60)
    db = home / ".pi/agent/workflows/state.sqlite"
    before = db.read_bytes()
    result = _cli_read_only(home, *command.split())
    assert result.returncode == 77, result.stderr
    assert "read-only" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert db.read_bytes() == before
