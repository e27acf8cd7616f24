"""A path as written in a tool call or a command, as the file it names.

Pi's tools drop a leading `@`, turn Unicode spaces into spaces, expand `~` and `~/` to the
home directory and resolve the rest against the working directory; `resolve` does the same,
then resolves `..` and the symbolic links that exist (a link to the database is the database).
"""

from __future__ import annotations

import os
import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Final

__all__ = [
    "expand_braces", "expand_variables", "glob_matches", "is_within", "lexical", "resolve",
    "tool_path",
]


_UNICODE_SPACES: Final = re.compile("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")
_VARIABLE: Final = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def tool_path(text: str, *, cwd: Path, home: Path) -> Path:
    """The file a read/write/edit/grep/find/ls tool's `path` names."""
    text = _UNICODE_SPACES.sub(" ", text[1:] if text.startswith("@") else text)
    return resolve(text, cwd=cwd, home=home)


def resolve(text: str, *, cwd: Path, home: Path) -> Path:
    """`text` as an absolute path: `~` expanded, relative to `cwd`, `..` and links resolved."""
    if text == "~" or text.startswith("~/"):
        text = str(home) + text[1:]
    path = Path(text)
    if not path.is_absolute():
        path = cwd / path
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return Path(os.path.normpath(path))


def lexical(text: str, *, cwd: Path, home: Path) -> Path:
    """Like `resolve` without following links (what the words say)."""
    if text == "~" or text.startswith("~/"):
        text = str(home) + text[1:]
    path = Path(text)
    return Path(os.path.normpath(path if path.is_absolute() else cwd / path))


def expand_variables(text: str, known: dict[str, str]) -> str:
    """`$NAME` and `${NAME}` replaced where the value is known; others are left as written."""
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return known.get(name, match.group(0))
    return _VARIABLE.sub(value, text)


def expand_braces(text: str, limit: int = 64) -> list[str]:
    """Bash brace expansion of `a{b,c}d` (nested, at most `limit` results)."""
    results = [text]
    for _ in range(8):
        grown: list[str] = []
        changed = False
        for item in results:
            parts = _first_brace(item)
            if parts is None:
                grown.append(item)
                continue
            changed = True
            before, options, after = parts
            grown += [before + option + after for option in options]
        results = grown[:limit]
        if not changed:
            break
    return results


def _first_brace(text: str) -> tuple[str, list[str], str] | None:
    start = text.find("{")
    while start >= 0:
        level, piece = 0, ""
        options: list[str] = []
        for i in range(start + 1, len(text)):
            c = text[i]
            if c == "{":
                level += 1
            elif c == "}" and level == 0:
                if options:
                    return text[:start], [*options, piece], text[i + 1:]
                break
            elif c == "}":
                level -= 1
            elif c == "," and level == 0:
                options.append(piece)
                piece = ""
                continue
            piece += c
        start = text.find("{", start + 1)
    return None


def is_within(path: Path, directory: Path) -> bool:
    """True when `path` is `directory` or lies under it."""
    return path == directory or directory in path.parents


def glob_matches(pattern: Path, path: Path) -> bool:
    """Whether the shell glob `pattern` (absolute, `*` within a component, `**` across
    components) could name `path`."""
    def match(p: tuple[str, ...], q: tuple[str, ...]) -> bool:
        if not p:
            return not q
        if p[0] == "**":
            return any(match(p[1:], q[i:]) for i in range(len(q) + 1))
        return bool(q) and fnmatchcase(q[0], p[0]) and match(p[1:], q[1:])

    return match(pattern.parts, path.parts)
