"""Everything a bash command line runs, flattened: each program with its arguments (every
wrapper layer), in the directory it runs in, plus the interpreter code it hands over and what
could not be read. The guard and the policy rules both judge this one list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from channels.gate.commands import MAX_DEPTH, SUBSTITUTION, SimpleCommand, parse_script
from channels.gate.paths import expand_variables, lexical
from channels.gate.wrappers import program_name, unwrap

MAX_EXECS: Final = 5000


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
        if len(out.execs) >= MAX_EXECS:
            out.problems.append("the command line runs too many commands")
            return
        for name, value in command.assignments:
            if command.words:
                continue  # `X=1 cmd`: for that command only
            if "$" in value.replace("$HOME", "").replace("$PWD", ""):
                known.pop(name, None)
            else:
                known[name] = expand_variables(value, known)
        runs = unwrap(command)
        if not runs.layers:
            out.execs.append(Exec((), command, cwd, True))
        for index, layer in enumerate(runs.layers):
            words = tuple(expand_variables(w, known) for w in layer)
            out.execs.append(Exec(words, command, cwd, index == 0, runs.unseen_stdin))
        out.code += runs.code
        for line in runs.scripts:
            _walk(line, cwd, home, depth + 1, known, out)
        cwd = _next_cwd(runs.layers[0] if runs.layers else (), cwd, home, known)


def _next_cwd(words: tuple[str, ...], cwd: Path | None, home: Path,
              known: dict[str, str]) -> Path | None:
    """The directory after a `cd` (or `pushd`); None when it cannot be told."""
    if not words or program_name(words[0]) not in ("cd", "pushd"):
        return cwd
    targets = [w for w in words[1:] if not w.startswith("-") or w == "-"]
    if not targets:
        return home
    target = expand_variables(targets[0], known)
    if cwd is None or "$" in target or SUBSTITUTION in target or target == "-":
        return None
    return lexical(target, cwd=cwd, home=home)
