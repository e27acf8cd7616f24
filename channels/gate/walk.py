"""Everything a bash command line runs, flattened: each program with its arguments (every
wrapper layer), in the directory it runs in, plus the interpreter code it hands over and what
could not be read. The guard and the policy rules both judge this one list.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from channels.gate.commands import MAX_DEPTH, SUBSTITUTION, SimpleCommand, parse_script
from channels.gate.paths import expand_braces, expand_variables, lexical
from channels.gate.wrappers import printed, program_name, unwrap

__all__ = ["ASSIGNMENT", "Exec", "Walk", "walk"]


_MAX_EXECS: Final = 5000
_MAX_SCRIPT_BYTES: Final = 256 * 1024
_MISSING: Final = object()  # a script file that does not exist when the call is judged
# Variables whose value is a command that git, ssh, editors or bash itself will run.
_COMMAND_VARIABLES: Final = frozenset({
    "GIT_SSH_COMMAND", "GIT_EDITOR", "GIT_PAGER", "GIT_SEQUENCE_EDITOR", "GIT_EXTERNAL_DIFF",
    "EDITOR", "VISUAL", "PAGER", "MANPAGER", "LESSOPEN", "SSH_ASKPASS", "SUDO_ASKPASS",
    "PROMPT_COMMAND", "BROWSER"})
_CHDIR: Final = frozenset({"-C", "-D", "--chdir", "--directory", "--cwd", "--wd", "--cd"})
_CHDIR_LONG: Final = ("--chdir=", "--directory=", "--cwd=", "--wd=", "--cd=")
ASSIGNMENT: Final = "="  # the program word of the Exec that stands for a variable's value
# Programs whose name at the start of a variable's value makes it a command line to judge.
_WATCHED: Final = frozenset({"piw-channels", "pi", "kill", "pkill", "killall", "sqlite3"})
_DECLARE: Final = frozenset({"export", "declare", "typeset", "local", "readonly"})


@dataclass(frozen=True, slots=True)
class Exec:
    """One program run with its arguments (variables expanded where they are known)."""

    words: tuple[str, ...]
    command: SimpleCommand
    cwd: Path | None  # None after a `cd` this reader could not follow
    first: bool  # the command's own words, not a layer unwrapped from them
    unseen_stdin: bool = False

    @property
    def program(self) -> str:
        return program_name(self.words[0]) if self.words else ""


@dataclass(slots=True)
class Walk:
    """What a command line runs, and what of it could not be read."""

    execs: list[Exec] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # script files a shell runs, not there


def walk(text: str, *, cwd: Path, home: Path) -> Walk:
    """Everything `text` runs (never raises for any text)."""
    out = Walk()
    known = {"HOME": str(home), "PWD": str(cwd)}
    _walk(text, cwd, home, 0, known, out)
    return out


def _walk(text: str, cwd: Path | None, home: Path, depth: int, known: dict[str, str],
          out: Walk) -> None:
    if depth > MAX_DEPTH:
        out.problems.append("commands are nested too deeply")
        return
    script = parse_script(text, depth)
    if script.problem:
        out.problems.append(script.problem)
    for command in script.commands:
        if len(out.execs) >= _MAX_EXECS:
            out.problems.append("the command line runs too many commands")
            return
        _assign(command, known, cwd, home, depth, out)
        runs = unwrap(command)
        if not runs.layers:
            out.execs.append(Exec((), command, cwd, True))
        here = cwd
        for index, layer in enumerate(runs.layers):
            words = _expanded(layer, known)
            if words and "{" in words[0]:
                words = tuple(e for w in words for e in expand_braces(w))  # `{piw-channels,x}`
            if any(w in _CHDIR or w.startswith(_CHDIR_LONG) for w in words[1:]):
                here = None  # `env -C DIR`, `tar -C DIR`: relative to a directory not followed
            out.execs.append(Exec(words, command, here, index == 0, runs.unseen_stdin))
            if words and "/" in words[0] and words[0] not in runs.files \
                    and _is_shell_script(words[0], cwd):
                runs.files.append(words[0])  # `./deploy.sh`: run by the shell its #! names
        out.code += runs.code
        for line in runs.scripts:
            _walk(expand_variables(line, known), cwd, home, depth + 1, known, out)
            if SUBSTITUTION in line and command.inner[:1] in (("echo",), ("printf",)):
                # `eval "$(printf 'piw-channels cancel x')"`: what the substitution prints
                _walk(printed(command.inner), cwd, home, depth + 1, dict(known), out)
        for name in runs.files:
            body = _script_file(expand_variables(name, known), cwd, home)
            if isinstance(body, str):
                _walk(body, cwd, home, depth + 1, dict(known), out)
            elif body is _MISSING:
                out.missing.append(name)
        cwd = _next_cwd(runs.layers[0] if runs.layers else (), cwd, home, known)


def _assign(command: SimpleCommand, known: dict[str, str], cwd: Path | None, home: Path,
            depth: int, out: Walk) -> None:
    """Variables set by the command (`X=1`, `export X=1`), and the ones that name a command
    to run (`GIT_SSH_COMMAND=…`, `EDITOR=…`), walked as command lines."""
    pairs = list(command.assignments)
    if command.words and program_name(command.words[0]) in _DECLARE:
        for word in command.words[1:]:
            name, equals, value = word.partition("=")
            if equals and not word.startswith("-"):
                pairs.append((name, value))
    for name, value in pairs:
        # The value as a word (`DB=~/.pi/…/state.sqlite`: a path the guard checks), and as a
        # command line when it starts with a program the guard watches (`P="pi --mode rpc"`).
        out.execs.append(Exec((ASSIGNMENT, expand_variables(value, known)), command, cwd, False))
        first = value.split(maxsplit=1)[0] if value.strip() else ""
        if name in _COMMAND_VARIABLES or program_name(first) in _WATCHED:
            _walk(expand_variables(value, known), cwd, home, depth + 1, dict(known), out)
        if command.words and program_name(command.words[0]) not in _DECLARE:
            continue  # `X=1 cmd`: for that command only
        if value == "$!":
            known[name] = value  # a background job of this shell: never Pi or its bridge
        elif "$" in value.replace("$HOME", "").replace("$PWD", ""):
            known.pop(name, None)
        else:
            known[name] = expand_variables(value, known)


def _expanded(layer: tuple[str, ...], known: dict[str, str]) -> tuple[str, ...]:
    """Known variables expanded; a word an expansion filled with blanks (or IFS characters)
    is split as bash splits an unquoted expansion (`x="piw-channels cancel"; $x`)."""
    separators = " \t\n" + known.get("IFS", "")
    words: list[str] = []
    for word in layer:
        value = expand_variables(word, known)
        if value != word and any(c in value for c in separators):
            words += [w for w in re.split(f"[{re.escape(separators)}]+", value) if w]
        else:
            words.append(value)
    return tuple(words)


def _is_shell_script(word: str, cwd: Path | None) -> bool:
    """`./deploy.sh`: a file run directly whose first line names a shell."""
    path = Path(word) if word.startswith("/") or cwd is None else cwd / word
    try:
        with path.open("rb") as handle:
            first = handle.readline(200)
    except (OSError, ValueError):
        return False
    return first.startswith(b"#!") and bool(re.search(rb"\b(ba|z|da|k)?sh\b", first))


def _script_file(name: str, cwd: Path | None, home: Path) -> str | object | None:
    """The text of a script file a shell is told to run, when it is a small regular file;
    MISSING when no such file exists (yet); None when it cannot be told or read."""
    if "$" in name or SUBSTITUTION in name or name.startswith(("/dev/", "/proc/")) or (
            cwd is None and not name.startswith(("/", "~"))):
        return None
    path = lexical(name, cwd=cwd or home, home=home)
    try:
        if not os.path.lexists(path):
            return _MISSING
        if not path.is_file() or path.stat().st_size > _MAX_SCRIPT_BYTES:
            return None
        return path.read_text("utf-8", errors="replace")
    except OSError:
        return None


def _next_cwd(words: tuple[str, ...], cwd: Path | None, home: Path,
              known: dict[str, str]) -> Path | None:
    """The directory after a `cd` (or `pushd`); None when it cannot be told."""
    if words and program_name(words[0]) == "popd":
        return None  # the directory stack is not followed
    if not words or program_name(words[0]) not in ("cd", "pushd"):
        return cwd
    targets = [w for w in words[1:] if not w.startswith("-") or w == "-"]
    if not targets:
        return home
    target = expand_variables(targets[0], known)
    if cwd is None or "$" in target or SUBSTITUTION in target or target == "-":
        return None
    return lexical(target, cwd=cwd, home=home)
