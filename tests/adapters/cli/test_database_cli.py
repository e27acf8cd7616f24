"""CLI skeleton: init, verify, backup, status, exit codes, help for every command."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from adapters.cli.main import build_parser, run
from state.files import default_path
from tests.cli import piw


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return piw(home, *args)


def test_every_command_has_help_text() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    helps = {a.dest: a.help for a in sub._choices_actions}  # type: ignore[attr-defined]
    assert set(helps) == set(sub.choices)  # type: ignore[attr-defined]
    assert all(helps.values())


def test_version_and_help_exit_zero(home: Path) -> None:
    assert cli(home, "--version").stdout.startswith("piw-channels ")
    assert "Exit codes" in cli(home, "--help").stdout


def test_unknown_command_is_a_usage_error(home: Path) -> None:
    result = cli(home, "frobnicate")
    assert result.returncode == 2


def test_init_creates_once_and_prints_the_path(home: Path) -> None:
    first = cli(home, "init")
    assert first.returncode == 0 and first.stdout.strip() == str(default_path())
    second = cli(home, "init")
    assert second.returncode == 0 and second.stdout.strip() == str(default_path())


def test_read_commands_never_create_the_database(home: Path) -> None:
    status = cli(home, "status")
    assert status.returncode == 0 and "no database" in status.stdout
    assert json.loads(cli(home, "status", "--json").stdout)["database"] == "missing"
    verify = cli(home, "verify")
    assert verify.returncode == 65
    assert verify.stderr.startswith("Error: no state database")
    assert not default_path().exists()


def test_verify_json_reports_ok(home: Path) -> None:
    cli(home, "init")
    result = cli(home, "verify", "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout) | {"path": ""} == {
        "ok": True, "path": "", "schema": "ok", "integrity": "ok", "foreign_keys": "ok"}


def test_incompatible_database_exits_65_with_the_reset_instruction(home: Path) -> None:
    default_path().parent.mkdir(parents=True, mode=0o700)
    default_path().write_bytes(b"x" * 4096)
    default_path().chmod(0o600)
    for command in ("init", "status", "verify"):
        result = cli(home, command)
        assert result.returncode == 65, command
        assert "Move or remove the old workflow state" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_permission_problem_exits_77_with_the_fix(home: Path) -> None:
    cli(home, "init")
    default_path().chmod(0o644)
    result = cli(home, "status")
    assert result.returncode == 77
    assert f"chmod 600 {default_path()}" in result.stderr


def test_backup_writes_a_verified_copy_and_refuses_to_overwrite(home: Path, tmp_path: Path) -> None:
    cli(home, "init")
    dest = tmp_path / "copy.sqlite"
    assert cli(home, "backup", str(dest)).returncode == 0
    assert dest.stat().st_mode & 0o777 == 0o600
    again = cli(home, "backup", str(dest))
    assert again.returncode == 2 and "already exists" in again.stderr


def test_status_reports_counts_without_private_ids(home: Path) -> None:
    cli(home, "init")
    report = json.loads(cli(home, "status", "--json").stdout)
    assert report["database"]["schema"] == "ok"
    assert report["database"]["open_decisions"] == 0


def test_run_returns_the_exit_code_in_process(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["init"]) == 0
    assert capsys.readouterr().out.strip() == str(default_path())
