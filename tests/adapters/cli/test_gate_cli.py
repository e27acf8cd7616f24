"""`piw-channels gate on|off|show` through a real child process."""

from __future__ import annotations

import json
import stat
from dataclasses import dataclass
from pathlib import Path

from channels.config.gate import DEFAULT_POLICY, GATE_SCHEMA
from tests.cli import piw


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


def cli(home: Path, *argv: str) -> Result:
    done = piw(home, *argv)
    return Result(done.returncode, done.stdout, done.stderr)


def gate_file(home: Path) -> Path:
    return home / ".config" / "pi-workflows" / "gate.json"


def test_gate_on_writes_a_private_file_that_show_reports(home: Path) -> None:
    on = cli(home, "gate", "on")
    assert on.code == 0 and on.err == ""
    assert on.out.startswith("gate on: ") and str(gate_file(home)) in on.out
    path = gate_file(home)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    shown = cli(home, "gate", "show", "--json")
    assert shown.code == 0, shown.err
    document = json.loads(shown.out)
    assert document["path"] == str(path) and document["exists"] is True
    assert document["broken"] is None
    assert document["policy"] == {**DEFAULT_POLICY.to_json(), "enabled": True}
    assert json.loads(path.read_text()) == document["policy"]


def test_show_without_a_file_is_the_default_policy_switched_off(home: Path) -> None:
    shown = cli(home, "gate", "show")
    assert shown.code == 0 and shown.err == ""
    lines = shown.out.splitlines()
    assert lines[0] == "gate: off (turn it on with: piw-channels gate on)"
    assert "(no file: the default policy)" in lines[1]
    assert "git push" in shown.out and "@outside-project" in shown.out
    assert not gate_file(home).exists()
    assert lines[-2] == ("sandbox writes: the project, /tmp, /var/tmp, ~/.cache, ~/.npm"
                         " (sandbox: auto)")
    assert lines[-1].startswith("sandbox: ")


def test_show_says_where_the_sandbox_cannot_start_and_what_holds(home: Path,
                                                                tmp_path: Path) -> None:
    env = {"PIW_BWRAP": str(tmp_path / "no-bwrap")}
    done = piw(home, "gate", "show", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        f"sandbox: cannot start (bubblewrap ({tmp_path / 'no-bwrap'}) is not installed;"
        " install it: sudo apt-get install -y bubblewrap); the guard alone judges bash")
    gate_file(home).parent.mkdir(parents=True, mode=0o700)
    gate_file(home).write_text(json.dumps({"schema": GATE_SCHEMA, "sandbox": "require"}))
    gate_file(home).chmod(0o600)
    done = piw(home, "gate", "show", "--json", env=env)
    assert json.loads(done.stdout)["sandbox"].endswith("bash calls are refused (require)")


def test_on_and_off_keep_the_rest_of_the_file(home: Path) -> None:
    path = gate_file(home)
    path.parent.mkdir(parents=True, mode=0o700)
    custom = {"schema": GATE_SCHEMA, "audience": "ops", "timeoutMinutes": 3,
              "bash": ["make deploy"], "paths": [".env*"], "tools": ["write"]}
    path.write_text(json.dumps(custom))
    path.chmod(0o600)
    assert cli(home, "gate", "on").code == 0
    assert json.loads(path.read_text()) == {**custom, "enabled": True, "onTimeout": "deny",
                                        "sandbox": "auto", "sandboxWritable": []}
    off = cli(home, "gate", "off")
    assert off.code == 0 and off.out.startswith("gate off: ")
    assert json.loads(path.read_text()) == {**custom, "enabled": False, "onTimeout": "deny",
                                        "sandbox": "auto", "sandboxWritable": []}


def test_a_broken_file_is_reported_and_never_overwritten(home: Path) -> None:
    path = gate_file(home)
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_text('{"schema": "pi-workflows.gate.v1", "enabled": "yes"}')
    path.chmod(0o600)
    shown = cli(home, "gate", "show")
    assert shown.code == 78
    assert shown.out.splitlines()[0] == (f"gate: broken: {path}: enabled: must be true or false")
    as_json = cli(home, "gate", "show", "--json")
    assert as_json.code == 78
    assert json.loads(as_json.out)["broken"] == {
        "code": "config_invalid", "error": f"{path}: enabled: must be true or false"}
    on = cli(home, "gate", "on")
    assert on.code == 78 and on.out == ""
    assert on.err == f"Error: {path}: enabled: must be true or false\n"
    assert path.read_text() == '{"schema": "pi-workflows.gate.v1", "enabled": "yes"}'


def test_a_world_readable_file_exits_77_with_the_fix(home: Path) -> None:
    assert cli(home, "gate", "on").code == 0
    path = gate_file(home)
    path.chmod(0o644)
    shown = cli(home, "gate", "show")
    assert shown.code == 77 and f"chmod 600 {path}" in shown.out
    off = cli(home, "gate", "off")
    assert off.code == 77 and "permissions must be 0600" in off.err
    assert json.loads(path.read_text())["enabled"] is True


def test_the_config_dir_variable_is_honoured(home: Path, tmp_path: Path) -> None:
    directory = tmp_path / "elsewhere"
    done = piw(home, "gate", "on", env={"PI_WORKFLOWS_CONFIG_DIR": str(directory)})
    assert done.returncode == 0, done.stderr
    assert json.loads((directory / "gate.json").read_text())["enabled"] is True
    assert not gate_file(home).exists()
