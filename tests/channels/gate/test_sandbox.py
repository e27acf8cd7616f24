"""The sandbox's layout (what is writable, read-only, hidden) and real bubblewrap runs of it:
a command in the sandbox cannot read the state, the configuration or a token, cannot write
what runs outside it later, and sees only its own processes."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from channels.config.gate import DEFAULT_POLICY, SandboxMode
from channels.gate import confinement
from channels.gate.confinement import Confinement, Probe, confine, outside, probe, status
from channels.gate.protected import Protected
from channels.gate.sandbox import Mount, layout

# Under CI=true a missing bubblewrap fails these tests instead of skipping them.
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None and os.environ.get("CI") != "true",
                                 reason="bubblewrap is not installed")


@pytest.fixture
def state(home: Path, config_dir: Path) -> Path:
    directory = home / ".pi" / "agent" / "workflows"
    directory.mkdir(parents=True)
    (directory / "state.sqlite").write_text("decisions")
    (home / ".pi" / "agent" / "settings.json").write_text("{}")
    return directory


def shaped(protected: Protected, project: Path, home: Path, **kw: object) -> Confinement:
    policy = dataclasses.replace(DEFAULT_POLICY, **kw)  # type: ignore[arg-type]
    return confine(policy, probe(), protected, cwd=project, home=home)


def test_the_layout_hides_the_state_the_configuration_and_the_token(
        home: Path, project: Path, config_dir: Path, state: Path, protected: Protected) -> None:
    shape = layout(protected, cwd=project, home=home)
    assert shape.kind(state / "state.sqlite") is Mount.HIDDEN
    assert shape.kind(config_dir / "gate.json") is Mount.HIDDEN
    assert shape.kind(home / "secrets" / "bot.token") is Mount.HIDDEN  # its own directory
    assert shape.kind(home / ".pi" / "agent" / "settings.json") is Mount.RO
    assert shape.may_write(project / "src" / "x.py") and shape.may_write(Path("/tmp/x"))
    assert not shape.may_write(home / ".bashrc") and not shape.may_write(project / ".pi")
    assert shape.kind(project / ".pi") is Mount.RO_EMPTY  # a placeholder: Pi loads .pi/


def test_a_project_that_holds_the_home_keeps_its_dot_files_read_only(
        home: Path, config_dir: Path, state: Path, protected: Protected) -> None:
    (home / ".bashrc").write_text("# the person's\n")
    (home / ".cache").mkdir()
    shape = layout(protected, cwd=home, home=home)
    assert shape.may_write(home / "notes.txt") and shape.may_write(home / ".cache" / "pip")
    assert shape.kind(home / ".bashrc") is Mount.RO
    assert shape.kind(state) is Mount.HIDDEN and shape.kind(config_dir) is Mount.HIDDEN


def test_sandbox_writable_adds_directories_but_never_inside_what_is_protected(
        home: Path, project: Path, config_dir: Path, state: Path, protected: Protected,
        tmp_path: Path) -> None:
    extra = tmp_path / "build-cache"
    extra.mkdir()
    shape = layout(protected, cwd=project, home=home,
                   extra_writable=[extra, config_dir, state, home / ".pi" / "agent"])
    assert shape.may_write(extra / "x")
    assert shape.kind(config_dir) is Mount.HIDDEN and shape.kind(state) is Mount.HIDDEN
    assert not shape.may_write(home / ".pi" / "agent" / "extensions")


def test_a_write_outside_the_sandbox_is_asked_or_refused(
        home: Path, project: Path, config_dir: Path, state: Path, protected: Protected) -> None:
    found = shaped(protected, project, home)
    where = {"cwd": project, "home": home}
    assert outside(found, "write", {"path": "a.txt"}, **where, enabled=False) is None
    asked = outside(found, "edit", {"path": "~/.bashrc"}, **where, enabled=True)
    assert asked is not None and asked.action == "ask" and asked.rule == "sandbox: outside"
    refused = outside(found, "write", {"path": "../.bashrc"}, **where, enabled=False)
    assert refused is not None and refused.action == "block"
    assert "sandboxWritable" in refused.reason
    assert outside(shaped(protected, project, home, sandbox=SandboxMode.OFF), "write",
                   {"path": "~/.bashrc"}, **where, enabled=False) is None


def test_the_status_line_says_what_holds() -> None:
    working = Probe("/usr/bin/bwrap", "bubblewrap 0.8.0", None)
    missing = Probe(None, None, "bubblewrap (bwrap) is not installed; install it: ...")
    assert status(SandboxMode.AUTO, working).startswith("sandbox: on (bubblewrap 0.8.0)")
    assert status(SandboxMode.AUTO, missing).endswith("the guard alone judges bash")
    assert status(SandboxMode.REQUIRE, missing).endswith("bash calls are refused (require)")
    assert status(SandboxMode.OFF, working) == ("sandbox: off in the policy; the guard alone"
                                                " judges bash")


def test_probe_names_a_missing_or_broken_bubblewrap(tmp_path: Path) -> None:
    gone = probe({"PATH": os.environ["PATH"], confinement.BWRAP_ENV: str(tmp_path / "nope")})
    assert gone.bwrap is None and gone.problem is not None and "not installed" in gone.problem
    broken = tmp_path / "bwrap"
    broken.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\n"
                      "exit 1\n")
    broken.chmod(0o755)
    failed = probe({"PATH": os.environ["PATH"], confinement.BWRAP_ENV: str(broken)})
    assert failed.problem is not None and "uid map: Permission denied" in failed.problem


def test_require_refuses_bash_only_while_the_sandbox_cannot_start(
        home: Path, project: Path, config_dir: Path, state: Path, protected: Protected) -> None:
    missing = Probe(None, None, "bubblewrap (bwrap) is not installed")
    policy = dataclasses.replace(DEFAULT_POLICY, sandbox=SandboxMode.REQUIRE)
    refused = confine(policy, missing, protected, cwd=project, home=home).refusal()
    assert refused is not None and refused.rule == "sandbox: required"
    assert "not installed" in refused.reason
    auto = confine(DEFAULT_POLICY, missing, protected, cwd=project, home=home)
    assert auto.refusal() is None and auto.argv is None


def run_inside(found: Confinement, project: Path, command: str) -> subprocess.CompletedProcess[
        str]:
    assert found.argv is not None
    return subprocess.run([*found.argv, "--chdir", str(project), "--", "sh", "-c", command],
                          capture_output=True, text=True, timeout=60, check=False)


@needs_bwrap
def test_in_bubblewrap_the_secrets_are_empty_and_what_runs_later_is_read_only(
        home: Path, project: Path, config_dir: Path, state: Path, protected: Protected) -> None:
    (config_dir / "gate.json").write_text('{"enabled": true}')
    found = shaped(protected, project, home)
    done = run_inside(found, project, f"""
        ls -A {state}; ls -A {config_dir}; cat {home}/secrets/bot.token
        echo > {state}/state.sqlite; echo '{{}}' > {config_dir}/gate.json
        echo x > {home}/.pi/agent/settings.json; mkdir .pi/extensions
        echo made > made.txt; echo tmp > /tmp/piw-sandbox-unit; echo done""")
    assert done.stdout.split() == ["done"], done.stdout
    assert "Read-only file system" in done.stderr
    assert (state / "state.sqlite").read_text() == "decisions"
    assert (config_dir / "gate.json").read_text() == '{"enabled": true}'
    assert (home / ".pi" / "agent" / "settings.json").read_text() == "{}"
    assert (project / "made.txt").read_text() == "made\n"
    assert not (project / ".pi" / "extensions").exists()


@needs_bwrap
def test_in_bubblewrap_no_process_of_pi_or_its_bridge_is_visible(
        home: Path, project: Path, config_dir: Path, state: Path, protected: Protected) -> None:
    found = shaped(protected, project, home)
    done = run_inside(found, project, f"ls /proc | grep -c '^[0-9]'; kill -0 {os.getpid()}"
                      " 2>&1; test -t 0 || echo no-terminal")
    lines = done.stdout.split("\n")
    assert int(lines[0]) <= 4  # bubblewrap's init, the shell, ls, grep
    assert "No such process" in done.stdout and "no-terminal" in done.stdout
