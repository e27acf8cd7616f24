"""Guard rules on what a program run does by its name and arguments: the piw-channels
commands a person keeps for themselves, driving Pi, signalling or attaching to Pi and its
bridge, typing into a terminal, and copying piw-channels or Pi under another name."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import Final

from channels.gate.verdict import Judgement, block
from channels.gate.wrappers import CLI_PROGRAM, program_name, short_value

__all__ = ["GUARDED", "program_rule"]


# piw-channels commands that answer, cancel, resend, expire or reconfigure (a person's acts).
_BLOCKED_COMMANDS: Final = frozenset({"cancel", "resend", "expire", "setup"})
_BLOCKED_PI_COMMANDS: Final = frozenset({"answer", "bridge"})
# Process names and command lines of Pi and its bridge, to test kill patterns against.
_OUR_PROCESSES: Final = ("pi", "node", "python", "python3", CLI_PROGRAM,
                        "node /usr/local/bin/pi", f"python3 /usr/local/bin/{CLI_PROGRAM} pi bridge")
_KILLERS: Final = frozenset({"kill", "pkill", "killall", "skill"})
_TRACERS: Final = frozenset({"gdb", "strace", "ltrace", "gcore", "reptyr", "perf", "pidfd_getfd"})
_COPIERS: Final = frozenset({"cp", "ln", "install", "mv", "rsync", "alias"})
# Programs worth trying when a program word's value is not known (`$P cancel x`).
GUARDED: Final = frozenset({CLI_PROGRAM, "pi", *_KILLERS, "tmux", "screen", "xdotool"})
_SIGNAL: Final = re.compile(r"-(SIG)?[A-Z0-9]+")


def program_rule(words: Sequence[str], inner: Sequence[str], pids: Sequence[int]
                 ) -> Judgement | None:
    """The guard rule a program run with these words breaks, or None. `inner` holds the words
    of the commands in its substitutions (`cp $(which piw-channels) x`)."""
    if not words:
        return None
    name = _name(words[0])
    args = list(words[1:])
    ours = {str(pid) for pid in pids}
    if name == CLI_PROGRAM:
        return _cli(args)
    if name == "pi" or (name.endswith(".js") and "pi-coding-agent" in words[0]):
        return _pi(args)
    if name in _KILLERS:
        return _kill(name, args, ours)
    if name in _TRACERS:
        return _trace(name, args, ours)
    if name in _COPIERS and any(_name(w.split("=", 1)[-1]) in (CLI_PROGRAM, "pi")
                               for w in [*args, *inner]):
        return block(f"Blocked: copying or linking {CLI_PROGRAM} or Pi under another name "
                     "would get round the guard.", f"guard: {CLI_PROGRAM}")
    if name == "tmux" and any(a in ("send-keys", "send", "paste-buffer", "pasteb")
                              for a in args):
        return _typing()
    if name == "screen" and short_value(args, "X") in ("stuff", "paste"):
        return _typing()
    if name == "xdotool" and any(a in ("type", "key", "keydown") for a in args):
        return _typing()
    if "--mode=rpc" in args or ("--mode", "rpc") in itertools.pairwise(args):
        return _pi(["--mode", "rpc"])  # Pi under another name
    return None


def _name(word: str) -> str:
    name = program_name(word)
    if re.search(r"[*?\[]", name):  # `piw-channel?`: bash runs whatever the glob finds
        return next((g for g in sorted(GUARDED) if fnmatchcase(g, name)), name)
    return name


def _typing() -> Judgement:
    return block("Blocked: typing into a terminal could answer a decision as if a person "
                 "did; the agent may not do that.", "guard: terminal input")


def _cli(args: list[str]) -> Judgement | None:
    operands = [a for a in args if not a.startswith("-")]
    sub = operands[0] if operands else None
    second = operands[1] if len(operands) > 1 else None
    what: str | None = None
    if sub is not None and "$" in sub:
        what = sub  # a command word this reader cannot know: as if it were `cancel`
    elif sub in _BLOCKED_COMMANDS:
        what = sub
    elif sub == "pi" and (second is None or "$" in second or second in _BLOCKED_PI_COMMANDS):
        what = f"pi {second}" if second else "pi"
    elif sub == "gate" and (second in ("on", "off") or (second and "$" in second)):
        what = f"gate {second}"
    elif sub == "demo" and any(_abbreviates(a, ("--press", "--reply")) for a in args):
        what = "demo --press"
    if what is None:
        return None
    rule = f"guard: {CLI_PROGRAM}" if "$" in what else f"guard: {CLI_PROGRAM} {what}"
    return block(f"Blocked: `{CLI_PROGRAM} {what}` answers, cancels or changes decisions or "
                 "their channels; only a person may do that.", rule)


def _abbreviates(arg: str, options: tuple[str, ...]) -> bool:
    name = arg.split("=", 1)[0]
    return len(name) >= 4 and any(option.startswith(name) for option in options)


def _pi(args: list[str]) -> Judgement | None:
    mode = short_value(args, "", ("--mode",))
    session = any(a in ("-c", "-r", "-e", "--continue", "--resume", "--extension") or
                  a.split("=", 1)[0] in ("--session", "--fork", "--session-dir", "--extension")
                  for a in args)
    installs = bool(args) and args[0] in ("install", "remove", "uninstall", "update")
    if mode == "rpc" or session or installs:
        return block("Blocked: driving a Pi session (RPC mode, an existing session, another "
                     "extension) could answer its decisions; the agent may not do that.",
                     "guard: pi session")
    return None


def _kill(name: str, args: list[str], ours: set[str]) -> Judgement | None:
    if name == "kill":
        if any(a in ("-l", "-L", "--list", "--table") for a in args):
            return None
        targets = _operands(args, "sn", ("--signal",))
        risky = not targets or any(_unknown(t) or t in ("0", "-1") or t.lstrip("-") in ours
                                   for t in targets)
        return _signal_block(f"`kill {' '.join(args)}`".strip()) if risky else None
    parent = short_value(args, "P", ("--parent",))
    if parent is not None and (_unknown(parent) or parent in ours):
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


def _unknown(target: str) -> bool:
    """A pid whose value is not known (`$PPID`, `$(pgrep pi)`); `$!` is this shell's job."""
    return "$" in target and target != "$!"


def _trace(name: str, args: list[str], ours: set[str]) -> Judgement | None:
    target = short_value(args, "p", ("--pid", "--attach"))
    candidates = [target] if target is not None else []
    if name in ("gcore", "reptyr", "gdb"):
        candidates += [a for a in args if not a.startswith("-")]
    if any(c is not None and (_unknown(c) or c in ours) for c in candidates):
        return block(f"Blocked: attaching `{name}` to Pi or its piw-channels bridge could "
                     "change what they do; the agent may not do that.", "guard: signal")
    return None


def _names_ours(pattern: str, *, regex: bool) -> bool:
    if not regex:
        return program_name(pattern) in _OUR_PROCESSES
    try:
        compiled = re.compile(pattern)
    except re.error:
        return True
    return any(compiled.search(name) for name in _OUR_PROCESSES)


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
            if i == 0 and _SIGNAL.fullmatch(arg):
                i += 1  # the signal
            elif arg[1] in short and len(arg) == 2:
                i += 2
            else:
                if arg[1:].isdigit() and out:
                    out.append(arg)  # a process group after a pid
                i += 1
            continue
        out.append(arg)
        i += 1
    return out


def _signal_block(what: str) -> Judgement:
    return block(f"Blocked: {what} could stop Pi or its piw-channels bridge; the agent may not "
                 "signal them.", "guard: signal")
