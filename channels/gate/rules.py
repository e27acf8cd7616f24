"""The policy's rules applied: bash patterns on the parsed words of every command a line runs,
path patterns on the file a write or edit names (syntax: `channels.config.gate`)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Final

from channels.config.gate import OUTSIDE_PROJECT
from channels.gate.paths import glob_matches, is_within
from channels.gate.walk import ASSIGNMENT, Exec
from channels.gate.wrappers import SHELLS, program_name, unwrap

__all__ = ["bash_rule", "path_rule"]


# Long options and other spellings that are the same flag as a short one.
_ALIASES: Final = {
    "rm": {"--recursive": "r", "R": "r", "--force": "f", "--dir": "d"},
    "cp": {"--recursive": "r", "R": "r", "--force": "f"},
    "chmod": {"--recursive": "R"}, "chown": {"--recursive": "R"},
    "git": {"--force": "f"},
}
# Options of a program that take the next word as their value (not an operand).
_VALUED: Final = {"git": frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace",
                                    "--exec-path", "--config-env"}),
                  "npm": frozenset({"--prefix", "-w", "--workspace"})}


def bash_rule(patterns: Sequence[str], ex: Exec) -> str | None:
    """The first pattern that this program run matches, or None."""
    if ex.program == ASSIGNMENT:
        return None  # a variable's value, not a program run
    for pattern in patterns:
        if ("|" in pattern and _pipe_matches(pattern, ex)) or \
                ("|" not in pattern and _words_match(pattern, ex.words)):
            return pattern
    return None


def _pipe_matches(pattern: str, ex: Exec) -> bool:
    left, _, right = (side.strip() for side in pattern.partition("|"))
    upstream = ex.command.upstream
    if upstream is None or not _is_program(right, ex.program):
        return False
    if left == "*":
        return True
    return any(_is_program(left, program_name(layer[0])) for layer in unwrap(upstream).layers)


def _is_program(wanted: str, name: str) -> bool:
    if wanted == "sh":
        return name in SHELLS
    return name == wanted or name.startswith(wanted + ".")


@lru_cache(maxsize=1024)
def _pattern_words(pattern: str) -> tuple[str, ...]:
    return tuple(shlex.split(pattern))


def _words_match(pattern: str, words: Sequence[str]) -> bool:
    wanted = _pattern_words(pattern)
    if not words or not _is_program(wanted[0], program_name(words[0])):
        return False
    program = wanted[0]
    options = [w for w in wanted[1:] if w.startswith("-")]
    operands = [w for w in wanted[1:] if not w.startswith("-")]
    args = list(words[1:])
    given = _operands(program, args)
    if given[:len(operands)] != operands:
        return False
    flags = _flags(program, args)
    return all(_has_option(option, args, flags) for option in options)


def _operands(program: str, args: list[str]) -> list[str]:
    valued = _VALUED.get(program, frozenset())
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--":
            break
        elif arg.startswith("-"):
            skip = arg in valued
        else:
            out.append(arg)
    return out


def _flags(program: str, args: list[str]) -> set[str]:
    """The short flags given (clusters split, aliases folded), and the long options."""
    aliases = _ALIASES.get(program, {})
    found: set[str] = set()
    for arg in args:
        if arg == "--":
            found.add("--")
            break
        if arg.startswith("--"):
            name = arg.split("=", 1)[0]
            found.add(name)
            if name in aliases:
                found.add(aliases[name])
        elif arg.startswith("-") and len(arg) > 1:
            for letter in arg[1:]:
                found.add(aliases.get(letter, letter))
    return found


def _has_option(option: str, args: list[str], flags: set[str]) -> bool:
    if option == "--" or option.startswith("--"):
        return option in flags
    return all(letter in flags for letter in option[1:])


def path_rule(patterns: Sequence[str], target: Path, written: Path, *, cwd: Path,
              home: Path) -> str | None:
    """The first pattern the file (as resolved, or as written) matches, or None."""
    for pattern in patterns:
        if any(_path_matches(pattern, path, cwd, home) for path in (target, written)):
            return pattern
    return None


def _path_matches(pattern: str, path: Path, cwd: Path, home: Path) -> bool:
    inside = is_within(path, cwd)
    if pattern == OUTSIDE_PROJECT:
        return not inside
    if pattern.startswith(("~", "/")):
        anchored = Path(str(home) + pattern[1:]) if pattern.startswith("~") else Path(pattern)
        return glob_matches(anchored, path)
    if "/" not in pattern:
        parts = path.relative_to(cwd).parts if inside else path.parts[1:]
        return any(glob_matches(Path(pattern), Path(part)) for part in parts)
    return inside and glob_matches(cwd / pattern, path)
