"""What the model may never do through its tools, gate on or off: answer, cancel, resend or
expire decisions; read or write the state database, the configuration, the token files or
Pi's settings; drive a Pi session or type into a terminal; signal Pi or its bridge.

A guard rail against the model, not a sandbox: a process of the same user outside Pi can do
whatever the user can (README, "What the guard stops and what it does not").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Final

from channels.gate.commands import SUBSTITUTION, parse_script
from channels.gate.paths import (
    expand_braces,
    glob_matches,
    is_within,
    lexical,
    resolve,
    tool_path,
)
from channels.gate.programs import GUARDED, program_rule
from channels.gate.protected import (
    AGENT_SETTINGS,
    AGENT_SETTINGS_FILES,
    CONFIG,
    DATABASE,
    PI_SETTINGS,
    TOKEN,
    Place,
    Protected,
    file_block,
)
from channels.gate.verdict import Judgement, block
from channels.gate.walk import Exec, Walk, walk
from channels.gate.wrappers import CLI_PROGRAM, printed, program_name, string_literals

__all__ = ["guard_bash", "guard_path_tool"]


_MUTATING: Final = frozenset({"rm", "rmdir", "mv", "shred", "truncate", "chmod", "chown", "chgrp",
                             "ln", "unlink", "find", "rsync", "tar", "cp", "install", "srm",
                             "zip"})
# Programs that only list or name a protected directory (not read what is inside).
_LISTING: Final = frozenset({"ls", "cd", "pushd", "stat", "test", "[", "du", "mkdir", "file",
                            "realpath", "readlink", "dirname", "basename", "echo", "printf",
                            "tree", "exa", "eza", "df"})
_NEEDLES: Final = (("state.sqlite", DATABASE), (".pi/agent/workflows", DATABASE),
                   ("human_decision", DATABASE), ("state.database", DATABASE),
                   (CLI_PROGRAM, CLI_PROGRAM), ("piw_channels", CLI_PROGRAM),
                   ("adapters.cli", CLI_PROGRAM), ("adapters.pi", CLI_PROGRAM),
                   ("channels.decisions", CLI_PROGRAM), ("channels.pi", CLI_PROGRAM),
                   ("channels.telegram", CLI_PROGRAM), ("channels.config", CONFIG),
                   ("pi-workflows", CONFIG), (".pi/agent/settings", PI_SETTINGS),
                   (".pi/agent/extensions", PI_SETTINGS), ("tiocsti", "terminal input"),
                   *((name, AGENT_SETTINGS) for name in AGENT_SETTINGS_FILES))
_GLOB: Final = re.compile(r"[*?\[]")
_PROC: Final = re.compile(r"/proc/([^/]+)(?:/|$)")


# -- tools with a path ---------------------------------------------------------------------

def guard_path_tool(tool: str, tool_input: Mapping[str, Any], *, cwd: Path, home: Path,
                    protected: Protected) -> Judgement | None:
    """read/write/edit/grep/find/ls: a protected file (or, but for listing, a protected
    directory) named by the call's `path`."""
    value = tool_input.get("path")
    if value is None and tool in ("grep", "find", "ls"):
        value = "."
    if not isinstance(value, str):
        return block(f"Blocked: the {tool} call has no path to check.", "guard: input")
    target = tool_path(value, cwd=cwd, home=home)
    plain = lexical(value.removeprefix("@"), cwd=cwd, home=home)
    for path in (target, plain):
        hit = _process(str(path), protected)
        if hit is not None:
            return hit
    for path, kind in protected.files():
        if path in (target, plain):
            return file_block(kind, value)
    if tool not in ("find", "ls"):
        for directory, kind in protected.directories():
            if is_within(target, directory) or is_within(plain, directory):
                return file_block(kind, value)
    return None


# -- bash ------------------------------------------------------------------------------------

def guard_bash(command: str, *, cwd: Path, home: Path, protected: Protected,
               analysed: Walk | None = None, depth: int = 0) -> Judgement | None:
    """The first guard rule a command line breaks, or None."""
    found = walk(command, cwd=cwd, home=home) if analysed is None else analysed
    mentioned = sorted({program_name(part) for ex in found.execs for w in ex.words
                        for part in w.split()} & GUARDED)
    for ex in found.execs:
        hit = _exec_rule(ex, protected, mentioned) or _words(ex, protected, home)
        if hit is not None:
            return hit
    for code in found.code:
        hit = _guard_code(code, cwd=cwd, home=home, protected=protected, depth=depth)
        if hit is not None:
            return hit
    if depth == 0 and any(ex.unseen_stdin for ex in found.execs):
        hit = _unseen(found, cwd=cwd, home=home, protected=protected)
        if hit is not None:
            return hit
    if found.missing:
        # Written in the same assistant message (sibling calls run after all are judged),
        # it would run unread.
        return block(f"Blocked: the script {found.missing[0]} does not exist yet, so it cannot "
                     "be checked; once it is written, run it in a call of its own.",
                     "guard: unseen script")
    return None


def _exec_rule(ex: Exec, protected: Protected, mentioned: list[str]) -> Judgement | None:
    hit = program_rule(ex.words, ex.command.inner, protected.pids)
    if hit is None and ex.words and ("$" in ex.words[0] or SUBSTITUTION in ex.words[0]):
        # `$P cancel x`, `$(which piw-channels) cancel x`: try each guarded program the line
        # names, as if it were the one that runs.
        for name in mentioned:
            hit = hit or program_rule((name, *ex.words[1:]), (), protected.pids)
    return hit


def _unseen(found: Walk, *, cwd: Path, home: Path, protected: Protected) -> Judgement | None:
    """A shell or interpreter runs what a pipe or `<(…)` feeds it: judge the text that
    echo, printf and here-documents of the same line produce, as commands and as code."""
    texts = [printed(ex.words) for ex in found.execs
             if ex.program in ("echo", "printf") and len(ex.words) > 1]
    texts += [doc for ex in found.execs if ex.first and (doc := ex.command.stdin) is not None]
    for text in texts:
        hit = guard_bash(text, cwd=cwd, home=home, protected=protected, depth=1) or \
            _guard_code(text, cwd=cwd, home=home, protected=protected, depth=1)
        if hit is not None:
            return hit
    return None


def _guard_code(code: str, *, cwd: Path, home: Path, protected: Protected,
               depth: int = 0) -> Judgement | None:
    """Interpreter code: protected names in its text or its (concatenated) string literals,
    signals, and the commands its string literals would run."""
    literals = [s for s in string_literals(code)[:200] if len(s) < 10000]
    for text in [code, *literals]:
        hit = _named(text.lower(), protected)
        if hit is not None:
            return hit
    if re.search(r"kill", code) and re.search(r"ppid|pgrep|pidof|pkill|\bpi\b|piw", code):
        return block("Blocked: this code could stop Pi or its piw-channels bridge; the agent "
                     "may not signal them.", "guard: signal")
    if depth > 0:
        return None
    for line in [*literals, " ".join(literals)]:
        if parse_script(line).commands:
            hit = guard_bash(line, cwd=cwd, home=home, protected=protected, depth=1)
            if hit is not None:
                return hit
    return None


def _named(lowered: str, protected: Protected) -> Judgement | None:
    for path, kind in protected.files():
        if str(path).lower() in lowered or (kind == TOKEN and len(path.name) >= 5
                                             and path.name.lower() in lowered):
            return file_block(kind, path.name)
    for needle, kind in _NEEDLES:
        if needle in lowered:
            if kind == CLI_PROGRAM:
                return block(f"Blocked: this code runs {CLI_PROGRAM} or its library; only a "
                             "person may answer, cancel or change decisions.",
                             f"guard: {CLI_PROGRAM}")
            if kind == "terminal input":
                return block("Blocked: typing into a terminal could answer a decision as if "
                             "a person did; the agent may not do that.", "guard: terminal input")
            return file_block(kind, needle)
    return None


def _words(ex: Exec, protected: Protected, home: Path) -> Judgement | None:
    program = ex.program
    mutating = program in _MUTATING and (program != "find" or any(
        w == "-delete" or w.startswith(("-exec", "-ok")) for w in ex.words))
    texts = [(w, mutating, program in _LISTING) for w in ex.words]
    if ex.first:  # a redirection reads or writes the file, whatever the program
        texts += [(r.target, False, False) for r in ex.command.redirects if r.is_file]
    for text, changes, lists in texts:
        process = _process(text, protected)
        if process is not None:
            return process
        for value in _values(text):
            for candidate in expand_braces(value):
                kind = _path_hit(candidate, ex.cwd, home, protected, mutating=changes,
                                 listing=lists)
                if kind is not None:
                    return file_block(kind, text)
    return None


def _process(text: str, protected: Protected) -> Judgement | None:
    """`/proc/<pid>/…` of Pi or its bridge (their stdin, memory, environment)."""
    proc = _PROC.match(text)
    if proc and proc.group(1) not in ("self", "thread-self") and (
            "$" in proc.group(1) or SUBSTITUTION in proc.group(1)
            or proc.group(1) in {str(p) for p in protected.pids}):
        return block("Blocked: this reaches into the process of Pi or its piw-channels bridge; "
                     "the agent may not do that.", "guard: signal")
    return None


def _values(text: str) -> Iterable[str]:
    yield text
    if "=" in text:
        yield text.split("=", 1)[1]  # --db=PATH, of=PATH, NAME=PATH
    if text.startswith("file:"):
        yield text[5:].split("?", 1)[0]  # an SQLite URI


def _path_hit(text: str, cwd: Path | None, home: Path, protected: Protected, *,
              mutating: bool, listing: bool) -> str | None:
    if not text or "\n" in text:
        return None
    files = protected.files()
    named = next((k for p, k in files if str(p) in text), None)
    if named is not None:
        return named  # the absolute path inside a longer word (`file:/…/state.sqlite?mode=rw`)
    if "$" in text or SUBSTITUTION in text or (cwd is None and not _absolute(text)):
        return _unresolved_hit(text, cwd, home, files)
    base = cwd if cwd is not None else home
    plain = lexical(_tilde_user(text, home), cwd=base, home=home)
    if _GLOB.search(text):
        return next((k for p, k in files if glob_matches(plain, p)), None)
    real = resolve(_tilde_user(text, home), cwd=base, home=home)
    for path, kind in files:
        if path in (plain, real) or (mutating and any(_removes(path, kind, p)
                                                      for p in (plain, real))):
            return kind
    if not listing:
        for directory, kind in protected.directories():
            if is_within(plain, directory) or is_within(real, directory) or (
                    mutating and (is_within(directory, plain) or is_within(directory, real))):
                return kind
    return None


def _removes(path: Path, kind: str, target: Path) -> bool:
    """Whether a mutating program on `target` reaches the protected `path` in it. An agent's
    settings sit in the project and in home: only their own directory (`.claude`, `.codex`)
    counts, or every `find .` and `rm -rf build/..` in a project would be refused."""
    if kind == AGENT_SETTINGS:
        return is_within(path, target) and is_within(target, path.parent)
    return is_within(path, target)


def _tilde_user(text: str, home: Path) -> str:
    """`~alice/x` as `/home/alice/x` when alice is this user (home's owner by name)."""
    match = re.match(r"~([A-Za-z0-9._-]+)(/|$)", text)
    if match and home.name == match.group(1):
        return str(home) + text[match.end(1):]
    return text


def _absolute(text: str) -> bool:
    return text.startswith(("/", "~"))


def _unresolved_hit(text: str, cwd: Path | None, home: Path,
                    files: tuple[Place, ...]) -> str | None:
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
