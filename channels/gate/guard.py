"""What the model may never do through its tools, gate on or off: answer, cancel, resend or
expire decisions; read or write the state database, the configuration or the token files;
drive a Pi session or type into a terminal; signal Pi or its bridge.

A guard rail against the model, not a sandbox: a process of the same user outside Pi can do
whatever the user can (README, "What the guard stops and what it does not").
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cached_property
from pathlib import Path
from typing import Any, Final, Literal

from channels.gate.commands import SUBSTITUTION, parse_script
from channels.gate.paths import (
    expand_braces,
    glob_matches,
    is_within,
    lexical,
    resolve,
    tool_path,
)
from channels.gate.walk import Exec, Walk, walk
from channels.gate.wrappers import CLI_PROGRAM, program_name, short_value, string_literals
from state.files import STATE_RELATIVE_PATH

CONFIG_FILES: Final = ("channels.json", "credentials.json", "gate.json")
DATABASE_SUFFIXES: Final = ("", "-wal", "-shm", "-journal")
# piw-channels commands that answer, cancel, resend, expire or reconfigure (a person's acts).
BLOCKED_COMMANDS: Final = frozenset({"cancel", "resend", "expire", "setup"})
BLOCKED_PI_COMMANDS: Final = frozenset({"answer", "bridge"})
# Process names and command lines of Pi and its bridge, to test kill patterns against.
OUR_PROCESSES: Final = ("pi", "node", "python", "python3", CLI_PROGRAM,
                        "node /usr/local/bin/pi", f"python3 /usr/local/bin/{CLI_PROGRAM} pi bridge")
MUTATING: Final = frozenset({"rm", "rmdir", "mv", "shred", "truncate", "chmod", "chown", "chgrp",
                             "ln", "unlink", "find", "rsync", "tar", "cp", "install", "srm"})
_NEEDLES: Final = (("state.sqlite", "state database"), (".pi/agent/workflows", "state database"),
                   ("human_decision", "state database"), (CLI_PROGRAM, CLI_PROGRAM),
                   ("piw_channels", CLI_PROGRAM), ("adapters.cli", CLI_PROGRAM),
                   ("pi-workflows", "config file"))
_GLOB: Final = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class Judgement:
    """What to do with one tool call: run it, ask a person, or refuse it."""

    action: Literal["allow", "ask", "block"]
    reason: str  # one plain line: for the model when blocked, shown on the card when asked
    rule: str | None  # e.g. "bash: git push", "path: .env*", "guard: state database"


ALLOW: Final = Judgement("allow", "no rule matches this call", None)


@dataclass(frozen=True)
class Protected:
    """What the guard protects, computed once per session."""

    database: Path  # ~/.pi/agent/workflows/state.sqlite
    config_dir: Path
    token_files: tuple[Path, ...]
    pids: tuple[int, ...] = ()  # the bridge and its Pi (their numbers, for `kill N`)

    @classmethod
    def discover(cls, home: Path, config_dir: Path) -> Protected:
        """The database under `home`, the config dir, the token files credentials.json names
        (read leniently: a broken file still protects the paths it mentions), this process
        and its parent (the bridge and its Pi)."""
        return cls(home / STATE_RELATIVE_PATH, config_dir, _token_files(config_dir),
                   (os.getpid(), os.getppid()))

    def files(self) -> list[tuple[Path, str]]:
        """Every protected file with the name of what it is (as named, and resolved)."""
        return list(self._files)

    @cached_property
    def _files(self) -> tuple[tuple[Path, str], ...]:
        found = [(Path(f"{self.database}{s}"), "state database") for s in DATABASE_SUFFIXES]
        found += [(self.config_dir / name, "config file") for name in CONFIG_FILES]
        found += [(path, "token file") for path in self.token_files]
        both = found + [(resolve(str(p), cwd=p.parent, home=p.parent), k) for p, k in found]
        return tuple(dict.fromkeys(both))


def _token_files(config_dir: Path) -> tuple[Path, ...]:
    try:
        document = json.loads((config_dir / "credentials.json").read_text("utf-8"))
    except (OSError, ValueError):
        return ()
    table = document.get("telegram") if isinstance(document, dict) else None
    entries = table.values() if isinstance(table, dict) else ()
    return tuple(Path(e["tokenFile"]) for e in entries
                 if isinstance(e, dict) and isinstance(e.get("tokenFile"), str)
                 and os.path.isabs(e["tokenFile"]))


def block(reason: str, rule: str) -> Judgement:
    return Judgement("block", reason, rule)


def _file_block(kind: str, shown: str) -> Judgement:
    what = {"state database": "the decision state database", "config file":
            "the piw-channels configuration", "token file": "a bot token file"}[kind]
    return block(f"Blocked: this call touches {what} ({shown}); the agent may not read or "
                 "change decisions, channel state, configuration or tokens.", f"guard: {kind}")


# -- tools with a path ---------------------------------------------------------------------

def guard_path_tool(tool: str, tool_input: Mapping[str, Any], *, cwd: Path, home: Path,
                    protected: Protected) -> Judgement | None:
    """read/write/edit/grep/find/ls: a protected file named by the call's `path`."""
    value = tool_input.get("path")
    if value is None and tool in ("grep", "find", "ls"):
        value = "."
    if not isinstance(value, str):
        return block(f"Blocked: the {tool} call has no path to check.", "guard: input")
    target = tool_path(value, cwd=cwd, home=home)
    plain = lexical(value[1:] if value.startswith("@") else value, cwd=cwd, home=home)
    for path, kind in protected.files():
        if path in (target, plain):
            return _file_block(kind, value)
    return None


# -- bash ------------------------------------------------------------------------------------

def guard_bash(command: str, *, cwd: Path, home: Path, protected: Protected,
               analysed: Walk | None = None) -> Judgement | None:
    """The first guard rule a command line breaks, or None."""
    found = walk(command, cwd=cwd, home=home) if analysed is None else analysed
    files = protected.files()
    for ex in found.execs:
        hit = _program(ex, protected) or _words(ex, files, home)
        if hit is not None:
            return hit
    for code in found.code:
        hit = guard_code(code, cwd=cwd, home=home, protected=protected)
        if hit is not None:
            return hit
    return None


def guard_code(code: str, *, cwd: Path, home: Path, protected: Protected,
               depth: int = 0) -> Judgement | None:
    """Interpreter code: protected names in its text, signals, and the commands its string
    literals would run."""
    lowered = code.lower()
    for path, kind in protected.files():
        if str(path).lower() in lowered or (kind == "token file" and len(path.name) >= 5
                                             and path.name.lower() in lowered):
            return _file_block(kind, path.name)
    for needle, kind in _NEEDLES:
        if needle in lowered:
            if kind == CLI_PROGRAM:
                return block(f"Blocked: this code runs {CLI_PROGRAM}; only a person may "
                             "answer, cancel or change decisions.", f"guard: {CLI_PROGRAM}")
            return _file_block(kind, needle)
    if re.search(r"kill", code) and re.search(r"ppid|pgrep|pidof|pkill|\bpi\b|piw", code):
        return _signal_block("this code")
    if depth > 0:
        return None
    literals = [s for s in string_literals(code)[:200] if len(s) < 10000]
    for line in [*literals, " ".join(literals)]:
        if parse_script(line).commands:
            hit = guard_bash(line, cwd=cwd, home=home, protected=protected)
            if hit is not None:
                return hit
    return None


def _program(ex: Exec, protected: Protected) -> Judgement | None:
    name, args = ex.program, list(ex.words[1:])
    if name == CLI_PROGRAM:
        return _cli(args)
    if name == "pi" or (name.endswith(".js") and "pi-coding-agent" in ex.words[0]):
        return _pi(args)
    if name in ("kill", "pkill", "killall", "skill"):
        return _kill(name, args, protected)
    if name == "tmux" and any(a in ("send-keys", "send", "paste-buffer", "pasteb")
                              for a in args):
        return _typing()
    if name == "screen" and short_value(args, "X") in ("stuff", "paste"):
        return _typing()
    if name == "xdotool" and any(a in ("type", "key", "keydown") for a in args):
        return _typing()
    return None


def _typing() -> Judgement:
    return block("Blocked: typing into a terminal could answer a decision as if a person "
                 "did; the agent may not do that.", "guard: terminal input")


def _cli(args: list[str]) -> Judgement | None:
    operands = [a for a in args if not a.startswith("-")]
    sub = operands[0] if operands else None
    second = operands[1] if len(operands) > 1 else None
    what: str | None = None
    if sub in BLOCKED_COMMANDS:
        what = sub
    elif sub == "pi" and (second is None or second in BLOCKED_PI_COMMANDS):
        what = f"pi {second}" if second else "pi"
    elif sub == "gate" and second in ("on", "off"):
        what = f"gate {second}"
    elif sub == "demo" and any(_abbreviates(a, ("--press", "--reply")) for a in args):
        what = "demo --press"
    if what is None:
        return None
    return block(f"Blocked: `{CLI_PROGRAM} {what}` answers, cancels or changes decisions or "
                 "their channels; only a person may do that.", f"guard: {CLI_PROGRAM} {what}")


def _abbreviates(arg: str, options: tuple[str, ...]) -> bool:
    name = arg.split("=", 1)[0]
    return len(name) >= 4 and any(option.startswith(name) for option in options)


def _pi(args: list[str]) -> Judgement | None:
    mode = short_value(args, "", ("--mode",))
    session = any(a in ("-c", "-r", "--continue", "--resume") or
                  a.split("=", 1)[0] in ("--session", "--fork", "--session-dir") for a in args)
    if mode == "rpc" or session:
        return block("Blocked: driving a Pi session (RPC mode or an existing session) could "
                     "answer its decisions; the agent may not do that.", "guard: pi session")
    return None


def _kill(name: str, args: list[str], protected: Protected) -> Judgement | None:
    ours = {str(pid) for pid in protected.pids}
    if name == "kill":
        if any(a in ("-l", "-L", "--list", "--table") for a in args):
            return None
        targets = _operands(args, "sn", ("--signal",))
        risky = not targets or any("$" in t or t in ("0", "-1") or t.lstrip("-") in ours
                                   for t in targets)
        return _signal_block(f"`kill {' '.join(args)}`".strip()) if risky else None
    parent = short_value(args, "P", ("--parent",))
    if parent is not None and ("$" in parent or parent in ours):
        return _signal_block(f"`{name}` of Pi's children")
    operands = _operands(args, "sgGPtuUFoy", ("--signal", "--parent", "--user", "--group"))
    if not operands:
        everything = name == "killall" or short_value(args, "u", ("--user",)) is not None
        return _signal_block(f"`{name}` of every process") if everything else None
    regex = name != "killall" or any(a in ("-r", "--regexp") for a in args)
    for pattern in operands:
        if "$" in pattern or _names_ours(pattern, regex=regex):
            return _signal_block(f"`{name} {pattern}`")
    return None


def _names_ours(pattern: str, *, regex: bool) -> bool:
    if not regex:
        return program_name(pattern) in OUR_PROCESSES
    try:
        compiled = re.compile(pattern)
    except re.error:
        return True
    return any(compiled.search(name) for name in OUR_PROCESSES)


def _operands(args: list[str], short: str, long: tuple[str, ...] = ()) -> list[str]:
    """The operands of kill/pkill/killall: a leading `-SIGNAL` and the options (with their
    values) left out; everything after `--` is an operand (`kill -- -1`)."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return out + args[i + 1:]
        if arg.startswith("--"):
            i += 2 if "=" not in arg and arg in long else 1
            continue
        if arg.startswith("-") and len(arg) > 1:
            if i == 0 and re.fullmatch(r"-(SIG)?[A-Z0-9]+", arg):
                i += 1  # the signal
            elif arg[1] in short and len(arg) == 2:
                i += 2
            elif arg[1:].isdigit() and out:
                out.append(arg)  # a process group after a pid
                i += 1
            else:
                i += 1
            continue
        out.append(arg)
        i += 1
    return out


def _signal_block(what: str) -> Judgement:
    return block(f"Blocked: {what} could stop Pi or its piw-channels bridge; the agent may not "
                 "signal them.", "guard: signal")


def _words(ex: Exec, files: list[tuple[Path, str]], home: Path) -> Judgement | None:
    texts = list(ex.words)
    if ex.first:
        texts += [r.target for r in ex.command.redirects if r.is_file]
    mutating = ex.program in MUTATING and (ex.program != "find" or any(
        w == "-delete" or w.startswith("-exec") or w.startswith("-ok") for w in ex.words))
    for text in texts:
        for value in _values(text):
            for candidate in expand_braces(value):
                hit = _path_hit(candidate, ex.cwd, home, files, mutating=mutating)
                if hit is not None:
                    return _file_block(hit, text)
    return None


def _values(text: str) -> Iterable[str]:
    yield text
    if "=" in text:
        yield text.split("=", 1)[1]  # --db=PATH, of=PATH, NAME=PATH


def _path_hit(text: str, cwd: Path | None, home: Path, files: list[tuple[Path, str]], *,
              mutating: bool) -> str | None:
    if not text or "\n" in text:
        return None
    if "$" in text or SUBSTITUTION in text or (cwd is None and not _absolute(text)):
        return _unresolved_hit(text, cwd, home, files)
    base = cwd if cwd is not None else home
    plain = lexical(text, cwd=base, home=home)
    if _GLOB.search(text):
        return next((k for p, k in files if glob_matches(plain, p)), None)
    real = resolve(text, cwd=base, home=home)
    for path, kind in files:
        if path in (plain, real) or (mutating and (is_within(path, plain)
                                                   or is_within(path, real))):
            return kind
    return None


def _absolute(text: str) -> bool:
    return text.startswith(("/", "~"))


def _unresolved_hit(text: str, cwd: Path | None, home: Path,
                    files: list[tuple[Path, str]]) -> str | None:
    """A word whose value is not known: its file name, or a protected directory before it."""
    name = text.rsplit("/", 1)[-1]
    if "$" not in name and SUBSTITUTION not in name:
        # Globs only where they can mean the database: `$D/*.json` is too common to refuse.
        glob = _GLOB.search(name) and ("sqlite" in name or "state" in name)
        kind = next((k for p, k in files if p.name == name
                     or (glob and fnmatchcase(p.name, name))), None)
        if kind is not None:
            return kind
    head = re.split(r"\$", text, maxsplit=1)[0]
    if "/" in head and (cwd is not None or _absolute(head)):
        directory = lexical(head.rsplit("/", 1)[0] or "/", cwd=cwd or home, home=home)
        return next((k for p, k in files if p.parent == directory), None)
    return None
