"""The `piw-channels gate` command group: switch the tool-call gate on or off, show its policy.

    piw-channels gate on | off        set `enabled` in gate.json, keeping the rest of the file
    piw-channels gate show [--json]   the policy, whether its file is broken (exit 78/77), and
                                      whether the agent's bash runs in the sandbox here

A broken gate.json is never rewritten: `on` and `off` refuse it with its error (the person
fixes or deletes the file), since writing over it would lose what they wrote.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from channels.config.errors import ConfigError
from channels.config.gate import GATE_FILE, GatePolicy, load_gate_policy, write_gate_policy
from channels.config.loading import resolve_config_dir
from channels.gate import judging
from state.exit_codes import ExitCode

__all__ = ["register"]


def _cmd_switch(args: argparse.Namespace) -> int:
    """`gate on` / `gate off`."""
    directory = resolve_config_dir()
    policy = load_gate_policy(directory)  # a broken file raises: never overwrite it
    enabled = args.state == "on"
    path = write_gate_policy(directory, dataclasses.replace(policy, enabled=enabled))
    word = "on: the agent's tool calls that the policy names wait for a person" if enabled \
        else "off: no tool call waits for a person (the guard still applies)"
    print(f"gate {word} ({path})")
    return ExitCode.OK


def _cmd_show(args: argparse.Namespace) -> int:
    """`gate show [--json]`."""
    found = judging.gate_state(resolve_config_dir())
    path = str(found.path)
    if found.problem is not None:
        return _show_broken(args, path, found.problem, found.sandbox)
    if args.json:
        print(json.dumps({"path": path, "exists": found.exists, "broken": None,
                          "policy": found.policy.to_json(), "sandbox": found.sandbox},
                         indent=2, ensure_ascii=False))
        return ExitCode.OK
    for line in _describe(found.policy, path, exists=found.exists):
        print(line)
    print(found.sandbox)
    return ExitCode.OK


def _show_broken(args: argparse.Namespace, path: str, exc: ConfigError, sandbox: str) -> int:
    message = " ".join(str(exc).split())
    if args.json:
        print(json.dumps({"path": path, "exists": True, "policy": None,
                          "broken": {"code": exc.code, "error": message}, "sandbox": sandbox},
                         indent=2, ensure_ascii=False))
    else:
        print(f"gate: broken: {message}")
        print("While it is broken, every call the default policy would ask about is denied.")
        print(sandbox)
    return exc.exit_code


def _describe(policy: GatePolicy, path: str, *, exists: bool) -> list[str]:
    """The policy in plain lines."""
    source = path if exists else f"{path} (no file: the default policy)"
    state = "on" if policy.enabled else "off (turn it on with: piw-channels gate on)"
    minutes = f"{policy.timeout_minutes:g}"
    return [
        f"gate: {state}",
        f"policy: {source}",
        f"asks: audience {policy.audience}; waits {minutes} min, then: {policy.on_timeout}",
        f"tools: {_items(policy.tools)}",
        f"bash: {_items(policy.bash)}",
        f"paths: {_items(policy.paths)}",
        "sandbox writes: the project, /tmp, /var/tmp, ~/.cache, ~/.npm"
        + "".join(f", {d}" for d in policy.sandbox_writable) + f" (sandbox: {policy.sandbox})",
    ]


def _items(values: tuple[str, ...]) -> str:
    return ", ".join(values) if values else "(none)"


def register(sub: Any) -> None:
    """Add `gate` and its subcommands to the top-level parser."""
    gate = sub.add_parser(
        "gate", help="approve the agent's tool calls: switch the gate on or off, show it",
        description=f"The tool-call gate of the Pi extension; its policy is {GATE_FILE} "
        "beside channels.json.",
    )  # fmt: skip
    actions = gate.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    for state, text in (("on", "ask a person before the tool calls the policy names"),
                        ("off", "stop asking (the guard still blocks what it blocks)")):
        p = actions.add_parser(state, help=text, description=text)
        p.set_defaults(handler=_cmd_switch, state=state)
    show = actions.add_parser("show", help="print the policy and whether its file is broken")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(handler=_cmd_show)
