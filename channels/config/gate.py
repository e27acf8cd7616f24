"""The tool-call gate's policy: `gate.json` beside `channels.json`, strict like it, 0600.

The gate is off until a person turns it on (`piw-channels gate on`); a missing file is the
default policy, switched off. Rule syntax (checked here, applied by `channels.gate`):

- `tools`: tool names the gate looks at. `write` and `edit` are asked when their target
  matches a `paths` rule; any other name listed (`bash`, `read`, a custom tool) is asked on
  every call.
- `bash`: command patterns, matched on the words of each parsed simple command (after wrappers
  such as `sudo`, `env`, `sh -c` are unwrapped), never on a substring of the text: the first
  word is the program (compared by its name, `mkfs` also covers `mkfs.ext4`), words starting
  with `-` are options the command must carry (`-rf` = both `-r` and `-f`, in any spelling),
  other words are its leading operands in order (`git push` is not `git log --grep push`).
  `A|B` is a pipe from program A (`*`: any) into program B (`sh`: any shell).
- `paths`: targets of write and edit: `@outside-project` (not under the working directory),
  a name without `/` matched against every component (`.env*`, `.*` for dotfiles), a pattern
  starting with `~/` or `/` (anchored, `**` spans directories), or one relative to the project.
  While `write` is listed, the same rules but `@outside-project` apply to the files a bash
  command writes with `>`, `>>` or `tee`.
- `sandbox`: `auto` (the default: the agent's bash runs in the bubblewrap sandbox where it can
  start, the guard alone where it cannot, with a warning), `require` (bash calls are refused
  while the sandbox cannot start) or `off` (no sandbox; the guard alone).
- `sandboxWritable`: absolute directories (`~/` allowed) the sandboxed bash may also write,
  besides the project, /tmp, /var/tmp, ~/.cache and ~/.npm.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from channels.config import files
from channels.config.errors import ConfigInvalid
from channels.config.files import (
    FileRef,
    check_directory,
    file_identity,
    prepare_directory,
    write_private_json,
)
from channels.config.parsing import Source, audience_name_field, parse_json

__all__ = [
    "DEFAULT_POLICY", "GATE_FILE", "GATE_SCHEMA", "OUTSIDE_PROJECT", "GatePolicy", "SandboxMode",
    "gate_path", "load_gate_policy", "write_gate_policy",
]


GATE_FILE: Final = "gate.json"

GATE_SCHEMA: Final = "pi-workflows.gate.v1"

OUTSIDE_PROJECT: Final = "@outside-project"

_SPECIAL_PATHS: Final = (OUTSIDE_PROJECT,)

_MIN_TIMEOUT_MINUTES: Final = 0.5

_MAX_TIMEOUT_MINUTES: Final = 7 * 24 * 60.0  # a week: a gated call that waits longer is a mistake

_ON_TIMEOUT_VALUES: Final = ("deny",)

_WORD: Final = re.compile(r"[A-Za-z0-9_.+@%:=/,~-]+")  # one word of a bash pattern
_TOOL: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


class SandboxMode(StrEnum):
    """Where the agent's bash runs."""

    AUTO = "auto"  # in the sandbox where it can start; the guard alone (with a warning) if not
    REQUIRE = "require"  # in the sandbox, or not at all
    OFF = "off"  # never in the sandbox


@dataclass(frozen=True, slots=True)
class GatePolicy:
    """Which of the agent's tool calls need a person, whom to ask and how long to wait."""

    enabled: bool = False
    audience: str = "operator"
    timeout_minutes: float = 10.0
    on_timeout: str = "deny"
    tools: tuple[str, ...] = ("write", "edit")
    bash: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    sandbox: SandboxMode = SandboxMode.AUTO
    sandbox_writable: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """The document `gate.json` holds for this policy (field order as documented)."""
        minutes = self.timeout_minutes
        return {
            "schema": GATE_SCHEMA,
            "enabled": self.enabled,
            "audience": self.audience,
            "timeoutMinutes": int(minutes) if float(minutes).is_integer() else minutes,
            "onTimeout": self.on_timeout,
            "tools": list(self.tools),
            "bash": list(self.bash),
            "paths": list(self.paths),
            "sandbox": self.sandbox.value,
            "sandboxWritable": list(self.sandbox_writable),
        }


_DEFAULT_BASH: Final = (
    "git push", "git reset --hard", "git clean -f", "git checkout --", "git branch -D",
    "rm -rf", "rm -r", "sudo", "su", "doas", "curl|sh", "wget|sh", "*|sh",
    "chmod", "chown", "dd", "mkfs", "shred", "truncate", "mount", "umount",
    "npm publish", "pnpm publish", "yarn publish", "cargo publish", "twine upload",
    "gh release", "docker push", "kubectl delete", "terraform apply", "terraform destroy",
    "crontab", "reboot", "shutdown",
)

_DEFAULT_PATHS: Final = (
    "~/.ssh/**", "~/.aws/**", "~/.gnupg/**", "~/.config/**", "~/.kube/**", "~/.docker/**",
    ".env*", ".git/**", ".*", OUTSIDE_PROJECT,
)

DEFAULT_POLICY: Final = GatePolicy(bash=_DEFAULT_BASH, paths=_DEFAULT_PATHS)

_FIELDS: Final = ("schema", "enabled", "audience", "timeoutMinutes", "onTimeout", "tools", "bash",
                  "paths", "sandbox", "sandboxWritable")


def gate_path(config_dir: Path) -> Path:
    return config_dir / GATE_FILE


# Policies read, by file: (its file_identity when read, the policy). The Pi bridge judges every
# tool call of a session: it rereads gate.json only when the file or its directory changed.
_READ: dict[Path, tuple[tuple[int, ...], GatePolicy]] = {}


def load_gate_policy(config_dir: Path) -> GatePolicy:
    """The policy in `gate.json`, or DEFAULT_POLICY (off) when there is no such file.

    Raises a ConfigError naming the file and the field for a broken or non-private file.
    """
    path = gate_path(config_dir)
    identity = file_identity(path)
    cached = _READ.get(path)
    if identity is not None and cached is not None and cached[0] == identity:
        return cached[1]
    policy = _read_gate_policy(config_dir, path)
    if identity is not None and identity == file_identity(path):  # unchanged while read
        _READ[path] = (identity, policy)
    return policy


def _read_gate_policy(config_dir: Path, path: Path) -> GatePolicy:
    try:
        data = files.read_private_file(FileRef(path, str(path)))
    except FileNotFoundError:
        if path.is_symlink():
            raise ConfigInvalid(
                f"{path} is a symbolic link to a file that does not exist", path=path
            ) from None
        return DEFAULT_POLICY
    check_directory(config_dir)
    source = Source(str(path), path)
    return _parse_gate_policy(source, parse_json(source, data))


def write_gate_policy(config_dir: Path, policy: GatePolicy) -> Path:
    """Write `gate.json` atomically with mode 0600 (the directory 0700); returns its path."""
    prepare_directory(config_dir)
    path = gate_path(config_dir)
    write_private_json(path, policy.to_json())
    return path


def _parse_gate_policy(source: Source, value: object) -> GatePolicy:
    """A GatePolicy from a parsed document; every field but `schema` is optional."""
    if not isinstance(value, dict):
        raise source.invalid("", "must be a JSON object")
    if value.get("schema") != GATE_SCHEMA:
        raise source.invalid("schema", f"gate policy schema is invalid (it must be "
                                       f"{json.dumps(GATE_SCHEMA)})")
    for key in value:
        if key not in _FIELDS:
            raise source.invalid(key, f"is not a known field (allowed: {', '.join(_FIELDS)})")
    base = DEFAULT_POLICY
    return GatePolicy(
        enabled=_bool(source, value.get("enabled", base.enabled), "enabled"),
        audience=(audience_name_field(source, value["audience"], "audience")
                  if "audience" in value else base.audience),
        timeout_minutes=_minutes(source, value.get("timeoutMinutes", base.timeout_minutes)),
        on_timeout=_on_timeout(source, value.get("onTimeout", base.on_timeout)),
        tools=_list(source, value.get("tools", list(base.tools)), "tools", _tool_problem),
        bash=_list(source, value.get("bash", list(base.bash)), "bash", _bash_pattern_problem),
        paths=_list(source, value.get("paths", list(base.paths)), "paths", _path_pattern_problem),
        sandbox=_sandbox(source, value.get("sandbox", base.sandbox.value)),
        sandbox_writable=_list(source, value.get("sandboxWritable", []), "sandboxWritable",
                               _writable_problem),
    )


def _bool(source: Source, value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise source.invalid(where, "must be true or false")
    return value


def _minutes(source: Source, value: object) -> float:
    low, high = _MIN_TIMEOUT_MINUTES, _MAX_TIMEOUT_MINUTES
    rule = f"must be a number of minutes from {low:g} to {high:g}"
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise source.invalid("timeoutMinutes", rule)
    if not low <= value <= high:
        raise source.invalid("timeoutMinutes", f"{rule} (it is {value:g})")
    return float(value)


def _on_timeout(source: Source, value: object) -> str:
    if value not in _ON_TIMEOUT_VALUES:
        allowed = " or ".join(json.dumps(v) for v in _ON_TIMEOUT_VALUES)
        raise source.invalid("onTimeout", f"must be {allowed}")
    return str(value)


def _sandbox(source: Source, value: object) -> SandboxMode:
    if isinstance(value, str) and value in SandboxMode.__members__.values():
        return SandboxMode(value)
    allowed = ", ".join(json.dumps(m.value) for m in SandboxMode)
    raise source.invalid("sandbox", f"must be one of {allowed}")


def _list(source: Source, value: object, where: str,
          problem: Callable[[str], str | None]) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise source.invalid(where, "must be an array of strings")
    items: list[str] = []
    for index, item in enumerate(value):
        at = f"{where}[{index}]"
        if not isinstance(item, str):
            raise source.invalid(at, "must be a string")
        rule = problem(item)
        if rule is not None:
            raise source.invalid(at, f"{json.dumps(item)} {rule}")
        if item in items:
            raise source.invalid(at, f"repeats {json.dumps(item)}")
        items.append(item)
    return tuple(items)


def _tool_problem(text: str) -> str | None:
    """Why `text` is not a tool name, or None."""
    return None if _TOOL.fullmatch(text) else f"is not a tool name ({_TOOL.pattern})"


def _bash_pattern_problem(text: str) -> str | None:
    """Why `text` is not a bash command pattern, or None."""
    if text.count("|") > 1:
        return "may hold one '|' at most (a pipe from one program into another)"
    if "|" in text:
        left, _, right = (side.strip() for side in text.partition("|"))
        if left != "*" and not _WORD.fullmatch(left):
            return "must be PROGRAM|PROGRAM (or *|PROGRAM) around its '|'"
        return None if _WORD.fullmatch(right) else "must name the program after its '|'"
    try:
        words = shlex.split(text)
    except ValueError:
        return "is not a list of words (an unbalanced quote)"
    if not words:
        return "is empty"
    if words[0].startswith("-"):
        return "must start with a program name, not an option"
    bad = next((w for w in words if not _WORD.fullmatch(w)), None)
    return None if bad is None else f"holds a word that cannot be matched: {json.dumps(bad)}"


def _writable_problem(text: str) -> str | None:
    """Why `text` is not a directory the sandbox may let bash write, or None."""
    if not (text.startswith("/") or text.startswith("~/")) or "\x00" in text:
        return "must be an absolute directory (or start with ~/)"
    if ".." in text.split("/") or any(c in text for c in "*?["):
        return "must be a plain directory, without .. or wildcards"
    if text.rstrip("/") in ("", "~"):
        return "must not be / or the whole home directory"
    return None


def _path_pattern_problem(text: str) -> str | None:
    """Why `text` is not a path pattern, or None."""
    if text.startswith("@"):
        return None if text in _SPECIAL_PATHS else f"is not one of {', '.join(_SPECIAL_PATHS)}"
    if not text.strip() or "\x00" in text or text != text.strip():
        return "must be a non-empty pattern without surrounding spaces"
    if text.startswith("~") and not (text == "~" or text.startswith("~/")):
        return "may use ~ only as ~/ (this user's home)"
    if ".." in text.split("/"):
        return "must not contain .."
    return None
