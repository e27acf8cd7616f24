"""gate.json: strict parsing with one-line errors naming the file and the field, the default
policy when it is missing (off), atomic 0600 writes, and the documented example."""

from __future__ import annotations

import dataclasses
import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from channels.config.errors import ConfigInvalid, ConfigPermission
from channels.config.gate import (
    DEFAULT_POLICY,
    GATE_SCHEMA,
    GatePolicy,
    SandboxMode,
    load_gate_policy,
    write_gate_policy,
)
from tests.paths import ROOT


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "cfg"
    directory.mkdir(mode=0o700)
    return directory


def put(config_dir: Path, document: object, mode: int = 0o600) -> Path:
    path = config_dir / "gate.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    path.chmod(mode)
    return path


def test_a_missing_file_is_the_default_policy_switched_off(config_dir: Path) -> None:
    policy = load_gate_policy(config_dir)
    assert policy == DEFAULT_POLICY and policy.enabled is False
    assert policy.timeout_minutes == 10 and policy.on_timeout == "deny"
    assert policy.audience == "operator" and policy.tools == ("write", "edit")
    assert "git push" in policy.bash and "rm -rf" in policy.bash and "rm" not in policy.bash
    assert "@outside-project" in policy.paths and ".env*" in policy.paths


def test_only_the_schema_is_required_and_the_rest_defaults(config_dir: Path) -> None:
    put(config_dir, {"schema": GATE_SCHEMA, "enabled": True})
    assert load_gate_policy(config_dir) == dataclasses.replace(DEFAULT_POLICY, enabled=True)


def test_every_field_is_read(config_dir: Path) -> None:
    put(config_dir, {"schema": GATE_SCHEMA, "enabled": True, "audience": "ops",
                     "timeoutMinutes": 0.5, "onTimeout": "deny", "tools": ["deploy"],
                     "bash": ["make release", "*|sh"], "paths": ["secrets/**", "~/.netrc"]})
    assert load_gate_policy(config_dir) == GatePolicy(
        enabled=True, audience="ops", timeout_minutes=0.5, on_timeout="deny", tools=("deploy",),
        bash=("make release", "*|sh"), paths=("secrets/**", "~/.netrc"))


def test_the_sandbox_fields_are_read_and_written_back(config_dir: Path) -> None:
    put(config_dir, {"schema": GATE_SCHEMA, "sandbox": "require",
                     "sandboxWritable": ["/srv/build", "~/.cargo"]})
    policy = load_gate_policy(config_dir)
    assert policy.sandbox is SandboxMode.REQUIRE
    assert policy.sandbox_writable == ("/srv/build", "~/.cargo")
    assert DEFAULT_POLICY.sandbox is SandboxMode.AUTO and DEFAULT_POLICY.sandbox_writable == ()
    write_gate_policy(config_dir, policy)
    assert load_gate_policy(config_dir) == policy
    assert json.loads((config_dir / "gate.json").read_text())["sandbox"] == "require"


BAD = [
    ("{", "", "is not valid JSON"),
    ("[]", "", "must be a JSON object"),
    ({"enabled": True}, "schema", "gate policy schema is invalid"),
    ({"schema": "pi-workflows.gate.v2"}, "schema", "gate policy schema is invalid"),
    ({"schema": GATE_SCHEMA, "enable": True}, "enable", "is not a known field"),
    ({"schema": GATE_SCHEMA, "enabled": "true"}, "enabled", "must be true or false"),
    ({"schema": GATE_SCHEMA, "enabled": 1}, "enabled", "must be true or false"),
    ({"schema": GATE_SCHEMA, "audience": "no spaces"}, "audience", "audience is invalid"),
    ({"schema": GATE_SCHEMA, "audience": 3}, "audience", "must be a non-empty string"),
    ({"schema": GATE_SCHEMA, "timeoutMinutes": 0.02}, "timeoutMinutes",
     "must be a number of minutes from 0.5 to 10080 (it is 0.02)"),
    ({"schema": GATE_SCHEMA, "timeoutMinutes": 0}, "timeoutMinutes", "from 0.5 to 10080"),
    ({"schema": GATE_SCHEMA, "timeoutMinutes": -5}, "timeoutMinutes", "from 0.5 to 10080"),
    ({"schema": GATE_SCHEMA, "timeoutMinutes": "10"}, "timeoutMinutes", "must be a number"),
    ({"schema": GATE_SCHEMA, "timeoutMinutes": True}, "timeoutMinutes", "must be a number"),
    ({"schema": GATE_SCHEMA, "timeoutMinutes": 1e9}, "timeoutMinutes", "from 0.5 to 10080"),
    ({"schema": GATE_SCHEMA, "onTimeout": "allow"}, "onTimeout", 'must be "deny"'),
    ({"schema": GATE_SCHEMA, "tools": "write"}, "tools", "must be an array of strings"),
    ({"schema": GATE_SCHEMA, "tools": [1]}, "tools[0]", "must be a string"),
    ({"schema": GATE_SCHEMA, "tools": ["a b"]}, "tools[0]", "is not a tool name"),
    ({"schema": GATE_SCHEMA, "tools": ["write", "write"]}, "tools[1]", "repeats"),
    ({"schema": GATE_SCHEMA, "bash": [""]}, "bash[0]", "is empty"),
    ({"schema": GATE_SCHEMA, "bash": ["-rf"]}, "bash[0]", "must start with a program name"),
    ({"schema": GATE_SCHEMA, "bash": ["git 'push"]}, "bash[0]", "unbalanced quote"),
    ({"schema": GATE_SCHEMA, "bash": ["a|b|c"]}, "bash[0]", "one '|' at most"),
    ({"schema": GATE_SCHEMA, "bash": ["|sh"]}, "bash[0]", "must be PROGRAM|PROGRAM"),
    ({"schema": GATE_SCHEMA, "bash": ["curl|"]}, "bash[0]", "must name the program"),
    ({"schema": GATE_SCHEMA, "bash": ["rm $(x)"]}, "bash[0]", "cannot be matched"),
    ({"schema": GATE_SCHEMA, "paths": ["@inside"]}, "paths[0]", "is not one of"),
    ({"schema": GATE_SCHEMA, "paths": [" .env"]}, "paths[0]", "without surrounding spaces"),
    ({"schema": GATE_SCHEMA, "paths": ["~bob/x"]}, "paths[0]", "may use ~ only as ~/"),
    ({"schema": GATE_SCHEMA, "paths": ["../x"]}, "paths[0]", "must not contain .."),
    ({"schema": GATE_SCHEMA, "sandbox": "on"}, "sandbox",
     'must be one of "auto", "require", "off"'),
    ({"schema": GATE_SCHEMA, "sandbox": True}, "sandbox", "must be one of"),
    ({"schema": GATE_SCHEMA, "sandboxWritable": "/srv"}, "sandboxWritable",
     "must be an array of strings"),
    ({"schema": GATE_SCHEMA, "sandboxWritable": ["build"]}, "sandboxWritable[0]",
     "must be an absolute directory"),
    ({"schema": GATE_SCHEMA, "sandboxWritable": ["/srv/*"]}, "sandboxWritable[0]",
     "without .. or wildcards"),
    ({"schema": GATE_SCHEMA, "sandboxWritable": ["/srv/../etc"]}, "sandboxWritable[0]",
     "without .. or wildcards"),
    ({"schema": GATE_SCHEMA, "sandboxWritable": ["/"]}, "sandboxWritable[0]",
     "must not be / or the whole home directory"),
    ({"schema": GATE_SCHEMA, "sandboxWritable": ["~/"]}, "sandboxWritable[0]",
     "must not be / or the whole home directory"),
    ('{"schema": "pi-workflows.gate.v1", "enabled": true, "enabled": false}', "",
     "repeats the key"),
    ('{"schema": "pi-workflows.gate.v1", "timeoutMinutes": NaN}', "", "is not JSON"),
]


@pytest.mark.parametrize(("document", "field", "rule"), BAD, ids=[r for _, _, r in BAD])
def test_a_broken_file_is_one_line_naming_the_file_and_the_field(
        config_dir: Path, document: object, field: str, rule: str) -> None:
    path = put(config_dir, document)
    with pytest.raises(ConfigInvalid) as caught:
        load_gate_policy(config_dir)
    error = caught.value
    message = str(error)
    assert message.startswith(f"{path}: {field or 'top level'}: "), message
    assert rule in message and "\n" not in message
    assert error.exit_code == 78 and error.code == "config_invalid" and error.path == path
    assert error.field == (field or None)


def test_a_file_readable_by_others_is_refused_with_the_fix(config_dir: Path) -> None:
    path = put(config_dir, {"schema": GATE_SCHEMA}, mode=0o644)
    with pytest.raises(ConfigPermission, match=r"permissions must be 0600.*chmod 600") as caught:
        load_gate_policy(config_dir)
    assert caught.value.exit_code == 77 and str(path) in str(caught.value)


def test_a_directory_or_a_dangling_link_is_refused(config_dir: Path) -> None:
    (config_dir / "gate.json").mkdir()
    with pytest.raises(ConfigInvalid, match="must be a regular file"):
        load_gate_policy(config_dir)
    (config_dir / "gate.json").rmdir()
    (config_dir / "gate.json").symlink_to(config_dir / "nowhere.json")
    with pytest.raises(ConfigInvalid, match="symbolic link to a file that does not exist"):
        load_gate_policy(config_dir)


def test_written_policies_are_0600_and_read_back_equal(tmp_path: Path) -> None:
    directory = tmp_path / "new" / "cfg"
    policy = dataclasses.replace(DEFAULT_POLICY, enabled=True, timeout_minutes=2.5)
    path = write_gate_policy(directory, policy)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert load_gate_policy(directory) == policy
    assert json.loads(path.read_text())["timeoutMinutes"] == 2.5
    assert [p.name for p in directory.iterdir()] == ["gate.json"]  # no temporary left


def test_the_documented_example_is_the_default_policy(tmp_path: Path) -> None:
    example = ROOT / "config.example" / "gate.json"
    put(tmp_path, example.read_text())
    assert load_gate_policy(tmp_path) == DEFAULT_POLICY
    readme = (ROOT / "config.example" / "README.md").read_text()
    for key in DEFAULT_POLICY.to_json():
        assert f"`{key}`" in readme, key


@pytest.fixture
def settled_at_once(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Files count as settled as soon as written (no two-second wait), and every read of
    gate.json is recorded."""
    from channels.config import files

    monkeypatch.setattr(files, "SETTLED_NS", 0)
    reads: list[Path] = []
    real = files.read_private_file

    def counted(ref: files.FileRef) -> bytes:
        reads.append(ref.path)
        return real(ref)

    monkeypatch.setattr(files, "read_private_file", counted)
    yield reads


def test_the_policy_is_reread_only_when_its_file_changes(
        tmp_path: Path, settled_at_once: list[Path]) -> None:
    directory = tmp_path / "cfg"
    write_gate_policy(directory, dataclasses.replace(DEFAULT_POLICY, enabled=True))
    assert [load_gate_policy(directory).enabled for _ in range(3)] == [True] * 3
    assert len(settled_at_once) == 1  # one read for three calls
    write_gate_policy(directory, dataclasses.replace(DEFAULT_POLICY, enabled=False))
    assert load_gate_policy(directory).enabled is False and len(settled_at_once) == 2
    (directory / "gate.json").chmod(0o644)  # same content, no longer private
    with pytest.raises(ConfigPermission):
        load_gate_policy(directory)

