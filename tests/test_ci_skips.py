"""The CI skip rule, run on a small suite of its own in a child pytest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ci_skips import unallowed

ROOT = Path(__file__).resolve().parents[1]

_SUITE = '''
import pytest

def test_runs():
    assert True

@pytest.mark.skip(reason="root reads files whatever their mode")
def test_root_only():
    pass

def test_needs_pi():
    pytest.skip(%r)
'''


def _inner(tmp_path: Path, ci: str | None, reason: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_inner.py").write_text(_SUITE % reason)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER")}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.ci_skips", "-p", "no:cacheprovider",
         "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_a_skip_for_a_missing_tool_fails_a_ci_run(tmp_path: Path) -> None:
    done = _inner(tmp_path, "true", "real Pi is not installed")
    assert done.returncode == 1, done.stdout
    assert "CI: 2 skipped (1 x root reads files whatever their mode, " \
           "1 x real Pi is not installed)" in done.stdout
    assert "CI: a test may skip only as root; 1 skipped for: real Pi is not installed" \
        in done.stdout


def test_root_only_skips_pass_in_ci_and_are_counted(tmp_path: Path) -> None:
    done = _inner(tmp_path, "true", "root can write into any directory")
    assert done.returncode == 0, done.stdout
    assert "CI: 2 skipped" in done.stdout


@pytest.mark.parametrize("ci", [None, "false"])
def test_outside_ci_a_skip_is_only_a_skip(tmp_path: Path, ci: str | None) -> None:
    done = _inner(tmp_path, ci, "real Pi is not installed")
    assert done.returncode == 0, done.stdout
    assert "CI:" not in done.stdout


def test_the_allowed_reasons_are_the_root_only_ones() -> None:
    assert unallowed(["root reads files whatever their mode", "only root can give a file away",
                      "node is not installed", "needs unshare -m"]) == \
        ["node is not installed", "needs unshare -m"]
