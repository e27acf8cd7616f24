"""`judge`: for one Pi tool call, whether it runs, needs a person, or is blocked.

The guard applies first and always (a blocked call never reaches a person). Then, with the
gate enabled, a matching rule asks. A broken policy file fails closed: what the default policy
would ask about is blocked with a reason naming the file; the rest follows the guard only.
A command line the reader cannot follow is asked about (gate on) or blocked (gate off, or a
broken policy): it is never allowed without being read.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from channels.config.errors import ConfigError
from channels.config.gate import DEFAULT_POLICY, OUTSIDE_PROJECT, GatePolicy
from channels.gate.guard import guard_bash, guard_path_tool
from channels.gate.paths import lexical, tool_path
from channels.gate.protected import Protected
from channels.gate.rules import bash_rule, path_rule
from channels.gate.verdict import ALLOW, Judgement, block
from channels.gate.walk import Walk, walk

__all__ = ["Judgement", "Protected", "judge"]


_PATH_TOOLS: Final = ("read", "write", "edit", "grep", "find", "ls")
_PATH_RULE_TOOLS: Final = ("write", "edit")


def judge(policy: GatePolicy | ConfigError, tool: str, tool_input: Mapping[str, Any], *,
          cwd: Path, home: Path, protected: Protected) -> Judgement:
    """The judgement on one tool call (never raises: an internal failure blocks the call)."""
    try:
        return _judge(policy, tool, tool_input, cwd=Path(os.path.realpath(cwd)), home=home,
                      protected=protected)
    except Exception as exc:  # a gate that fails must not let the call through
        return block(f"Blocked: the gate could not check this call ({type(exc).__name__}); "
                     "it was not run.", "gate: error")


def _judge(policy: GatePolicy | ConfigError, tool: str, tool_input: Mapping[str, Any], *,
           cwd: Path, home: Path, protected: Protected) -> Judgement:
    analysed: Walk | None = None
    if tool == "bash":
        command = tool_input.get("command")
        if not isinstance(command, str):
            return block("Blocked: the bash call has no command text to check.", "guard: input")
        analysed = walk(command, cwd=cwd, home=home)
        blocked = guard_bash(command, cwd=cwd, home=home, protected=protected,
                             analysed=analysed)
    elif tool in _PATH_TOOLS:
        blocked = guard_path_tool(tool, tool_input, cwd=cwd, home=home, protected=protected)
    else:
        blocked = None
    if blocked is not None:
        return blocked
    broken = policy if isinstance(policy, ConfigError) else None
    rules = dataclasses.replace(DEFAULT_POLICY, enabled=True) if broken else policy
    assert isinstance(rules, GatePolicy)
    asked = _asked(rules, tool, tool_input, analysed, cwd=cwd, home=home)
    if asked is None:
        return ALLOW
    if broken is not None:
        return block(f"Blocked: the gate policy is broken ({_one_line(broken)}); calls it "
                     "would ask a person about are denied until it is fixed.",
                     asked.rule or "gate: broken")
    if not rules.enabled:
        # Gate off: rules do not ask, but a line the guard could not read is not let through.
        return asked if asked.action == "block" else ALLOW
    return asked


def _asked(rules: GatePolicy, tool: str, tool_input: Mapping[str, Any],
           analysed: Walk | None, *, cwd: Path, home: Path) -> Judgement | None:
    if tool in rules.tools and tool not in _PATH_RULE_TOOLS:
        return Judgement("ask", f"Every {tool} call needs a person's approval.", f"tool: {tool}")
    if analysed is not None:
        return _bash(rules, analysed, cwd=cwd, home=home)
    if tool in _PATH_RULE_TOOLS and tool in rules.tools:
        value = tool_input.get("path")
        if not isinstance(value, str):
            return Judgement("ask", f"The {tool} call names no file.", f"tool: {tool}")
        target = tool_path(value, cwd=cwd, home=home)
        written = lexical(value.removeprefix("@"), cwd=cwd, home=home)
        pattern = path_rule(rules.paths, target, written, cwd=cwd, home=home)
        if pattern is not None:
            return Judgement("ask", f"{tool.capitalize()} {target}: it matches the path rule "
                             f"{pattern}.", f"path: {pattern}")
    return None


def _bash(rules: GatePolicy, analysed: Walk, *, cwd: Path, home: Path) -> Judgement | None:
    if analysed.problems:
        problem = analysed.problems[0]
        return Judgement("ask" if rules.enabled else "block",
                         f"The command cannot be checked ({problem}); write it more plainly.",
                         "bash: unreadable")
    for ex in analysed.execs:
        pattern = bash_rule(rules.bash, ex)
        if pattern is not None:
            shown = " ".join(ex.words)
            return Judgement("ask", f"Runs `{shown[:200]}`: it matches the command rule "
                             f"{pattern}.", f"bash: {pattern}")
    if "write" in rules.tools:
        return _bash_writes(rules, analysed, cwd=cwd, home=home)
    return None


def _bash_writes(rules: GatePolicy, analysed: Walk, *, cwd: Path,
                 home: Path) -> Judgement | None:
    """Files a command line writes through `>`, `>>` or `tee`, judged by the path rules
    but `@outside-project` (`2> /tmp/log` is too common to ask about)."""
    patterns = tuple(p for p in rules.paths if p != OUTSIDE_PROJECT)
    for ex in analysed.execs:
        targets = [r.target for r in ex.command.redirects
                   if ex.first and r.is_file and r.op not in ("<", "<&")]
        if ex.program == "tee":
            targets += [w for w in ex.words[1:] if not w.startswith("-")]
        for target in targets:
            if "$" in target or target.startswith("/dev/") or ex.cwd is None:
                continue
            written = lexical(target, cwd=ex.cwd, home=home)
            real = tool_path(target, cwd=ex.cwd, home=home)
            pattern = path_rule(patterns, real, written, cwd=cwd, home=home)
            if pattern is not None:
                return Judgement("ask", f"Writes {written}: it matches the path rule {pattern}.",
                                 f"path: {pattern}")
    return None


def _one_line(error: ConfigError) -> str:
    return " ".join(str(error).split())
