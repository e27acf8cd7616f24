"""One tool call judged as it stands on disk: the policy read from gate.json, the protected
set found, the guard and the policy applied, and, for Pi, the sandbox it runs in.

Pi's bridge (adapters.pi.gatedesk) passes its bubblewrap `Probe`, so the call also gets its
Confinement and the sandbox's rules (a bash that cannot be confined is refused, a write the
sandbox would not allow is asked); the other agents' hooks and MCP server
(adapters.agents.approvals) pass none: we do not run their bash. Either way a broken policy
file fails closed inside `judge`, and then nothing is asked: what it would ask about is
blocked.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from channels.config import gate as gate_config
from channels.config.errors import ConfigError
from channels.config.files import prepare_directory
from channels.config.gate import GatePolicy, SandboxMode
from channels.gate import confinement
from channels.gate.confinement import Confinement, Probe
from channels.gate.policy import judge
from channels.gate.protected import Protected
from channels.gate.verdict import Judgement

__all__ = ["gate_state", "judge_call"]


@dataclass(frozen=True, slots=True)
class _Judged:
    """The judgement on one call, the policy it was judged by (None: gate.json is broken)
    and, for Pi, where it would run."""

    found: Judgement
    policy: GatePolicy | None
    confinement: Confinement | None


@dataclass(frozen=True, slots=True)
class _GateState:
    """The gate as `gate show` and Pi's `/gate` report it: the policy file and whether it
    exists, the policy in force (the default while the file is broken), why the file is
    broken, and the one-line sandbox status."""

    path: Path
    exists: bool
    policy: GatePolicy
    problem: ConfigError | None
    sandbox: str


def gate_state(config_dir: Path, sandbox: Probe | None = None) -> _GateState:
    """The gate's state on disk; `sandbox` is a probe already made (one is made if not)."""
    path = gate_config.gate_path(config_dir)
    problem = None
    try:
        policy = gate_config.load_gate_policy(config_dir)
    except ConfigError as exc:
        policy, problem = gate_config.DEFAULT_POLICY, exc
    found = confinement.probe() if sandbox is None else sandbox
    return _GateState(path, path.exists(), policy, problem,
                     confinement.status(policy.sandbox, found))


def judge_call(tool: str, tool_input: Mapping[str, Any], cwd: Path, *, config_dir: Path,
               home: Path, session_gate: str | None = None,
               sandbox: Probe | None = None) -> _Judged:
    """The guard first, then the policy (`session_gate` "on"/"off", a Pi session's
    `/gate on|off`, overrides its `enabled`), then, given the bubblewrap `sandbox` probe,
    the confinement."""
    policy: GatePolicy | ConfigError
    try:
        policy = gate_config.load_gate_policy(config_dir)
    except ConfigError as exc:
        policy = exc
    if isinstance(policy, GatePolicy) and session_gate is not None:
        policy = dataclasses.replace(policy, enabled=session_gate == "on")
    rules = policy if isinstance(policy, GatePolicy) else None
    confining = rules or gate_config.DEFAULT_POLICY  # a broken policy still confines bash
    if sandbox is not None and confining.sandbox is not SandboxMode.OFF \
            and not config_dir.exists():
        # Made now, empty and private, so the sandbox can hide it: else the agent could
        # create the configuration (a gate.json of its own) before a person does.
        with contextlib.suppress(ConfigError):
            prepare_directory(config_dir)
    protected = Protected.discover(home, config_dir, cwd)
    confined = None if sandbox is None else confinement.confine(
        confining, sandbox, protected, cwd=cwd, home=home)
    found = judge(policy, tool, tool_input, cwd=cwd, home=home, protected=protected)
    if found.action == "allow" and confined is not None:
        if tool == "bash":
            found = confined.refusal() or found
        else:
            found = confinement.outside(confined, tool, tool_input, cwd=cwd, home=home,
                                        enabled=rules is not None and rules.enabled) or found
    if found.action == "ask" and rules is None:  # judge never asks without a policy
        found = dataclasses.replace(found, action="block")
    return _Judged(found, rules, confined)
