"""What a simple command really runs: its wrappers unwrapped (`sudo`, `env`, `timeout`,
`xargs`, `find -exec`, ...), the command lines it hands to a shell (`sh -c`, `eval`,
`script -c`, a here-document into `sh`), and the code it hands to an interpreter
(`python -c`, `node -e`, a here-document into `python3`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from channels.gate.commands import SUBSTITUTION, SimpleCommand, decode_escapes

__all__ = [
    "CLI_PROGRAM", "SHELLS", "printed", "program_name", "short_value", "string_literals",
    "unwrap",
]


_MAX_LAYERS: Final = 32

SHELLS: Final = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "rbash",
                           "yash", "posh", "tcsh", "csh"})
# The CLI's own module: `python -m adapters.cli.main ARGS` is `piw-channels ARGS`.
_CLI_MODULES: Final = frozenset({"adapters.cli.main", "adapters.cli"})
CLI_PROGRAM: Final = "piw-channels"
_PYTHON: Final = re.compile(r"(python|pypy)([0-9.]*)(-dbg)?")
_CODE_FLAGS: Final = {"python": "c", "perl": "eE", "ruby": "e", "php": "r", "lua": "e",
                      "node": "ep", "bun": "e", "deno": ""}
_VALUE_FLAGS: Final = {"python": "WXQm", "perl": "", "ruby": "rIC", "php": "cdfz", "lua": "l",
                       "node": "r", "bun": "r", "deno": ""}
_NODE_LONG: Final = {"--eval": "code", "--print": "code", "--require": "value",
                     "--import": "value", "--input-type": "value", "--loader": "value"}
_INTERPRETERS: Final = {"python": "python", "pypy": "python", "perl": "perl", "ruby": "ruby",
                        "php": "php", "lua": "lua", "luajit": "lua", "node": "node",
                        "nodejs": "node", "bun": "bun", "deno": "deno"}
_AWKS: Final = frozenset({"awk", "gawk", "mawk", "nawk"})


@dataclass(slots=True)
class _Runs:
    """Everything one simple command runs, as far as its words tell."""

    layers: list[tuple[str, ...]] = field(default_factory=list)  # each a program and its args
    scripts: list[str] = field(default_factory=list)  # command lines it hands to a shell
    code: list[str] = field(default_factory=list)  # programs it hands to an interpreter
    files: list[str] = field(default_factory=list)  # script files it has a shell run
    unseen_stdin: bool = False  # a shell or interpreter runs what a pipe feeds it


def program_name(word: str) -> str:
    """The program a first word names: its file name (`/usr/bin/git` is `git`)."""
    name = word.rstrip("/").rsplit("/", 1)[-1]
    match = _PYTHON.fullmatch(name)
    return "python" if match else name


def unwrap(command: SimpleCommand) -> _Runs:
    """What `command` runs; its own words are the first layer."""
    runs = _Runs()
    queue: list[tuple[str, ...]] = [command.words] if command.words else []
    queue += [(alt, *command.words[1:]) for alt in command.alternatives]
    if command.alternatives[:1] in (("echo",), ("printf",)):
        # `$(printf 'piw-channels cancel') x`: the program and words the substitution prints
        queue.append((*printed(command.alternatives).split(), *command.words[1:]))
    while queue and len(runs.layers) < _MAX_LAYERS:
        words = queue.pop(0)
        if not words:
            continue
        runs.layers.append(words)
        name = program_name(words[0])
        handler = _HANDLERS.get(name)
        if handler is None:
            if name in SHELLS:
                handler = _shell
            elif _interpreter(name) is not None:
                handler = _interpreted
            elif name in _AWKS:
                handler = _awk
        if handler is not None:
            queue += [tuple(w) for w in handler(list(words[1:]), command, runs, name) if w]
    return runs


_Handler = Callable[[list[str], SimpleCommand, "_Runs", str], list[list[str]]]


def _after_options(words: Sequence[str], short: str = "", long: Sequence[str] = ()) -> list[str]:
    """The words after the leading options; `short` and `long` take a value."""
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return list(words[i + 1:])
        if not word.startswith("-") or word == "-":
            return list(words[i:])
        if word.startswith("--"):
            i += 2 if "=" not in word and word in long else 1
            continue
        i += 1
        for position, flag in enumerate(word[1:], start=1):
            if flag in short:
                attached = word[position + 1:]
                if not attached or all(letter in short for letter in attached):
                    i += 1  # the value is the next word (`-c CMD`, `node -pe CODE`)
                break
    return []


def short_value(words: Sequence[str], flags: str, long: Sequence[str] = ()) -> str | None:
    """The value of the first of `flags` (short, possibly in a cluster) or a `long` option."""
    for i, word in enumerate(words):
        if word == "--":
            return None
        for name in long:
            if word == name:
                return words[i + 1] if i + 1 < len(words) else ""
            if word.startswith(name + "="):
                return word[len(name) + 1:]
        if word.startswith("-") and not word.startswith("--") and len(word) > 1:
            for position, flag in enumerate(word[1:], start=1):
                if flag in flags:
                    rest = word[position + 1:]
                    if rest and all(letter in flags for letter in rest):
                        rest = ""  # `node -pe CODE`: two flags, the value is the next word
                    return rest or (words[i + 1] if i + 1 < len(words) else "")
    return None


def _plain(short: str = "", long: Sequence[str] = ()) -> _Handler:
    def handler(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
        return [_after_options(rest, short, long)]
    return handler


def _env(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    split = short_value(rest, "S", ("--split-string",))
    words = _after_options(rest, "uCS", ("--unset", "--chdir", "--split-string"))
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0], re.DOTALL):
        words = words[1:]
    if split is not None:
        runs.scripts.append(" ".join([split, *map(shlex.quote, words)]))
        return []
    return [words]


def _nice(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    if rest and re.fullmatch(r"-[0-9]+", rest[0]):
        rest = rest[1:]
    return [_after_options(rest, "n", ("--adjustment",))]


def _timeout(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    words = _after_options(rest, "sk", ("--signal", "--kill-after"))
    return [words[1:]]  # past the duration


def _taskset(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    words = _after_options(rest, "")
    return [words[1:]] if "-p" not in rest and "--pid" not in rest else []


def _first_operand_then_command(short: str) -> _Handler:
    def handler(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
        words = _after_options(rest, short)
        return [words[1:]]
    return handler


def _flock(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    script = short_value(rest, "c", ("--command",))
    if script is not None:
        runs.scripts.append(script)
        return []
    return [_after_options(rest, "wE", ("--timeout", "--conflict-exit-code"))[1:]]


def _command(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    if any(flag in rest[:2] for flag in ("-v", "-V")):
        return []  # `command -v x` only looks x up
    return [_after_options(rest, "")]


def _exec(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    return [_after_options(rest, "a")]


def _xargs(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    long = ("--arg-file", "--delimiter", "--max-lines", "--max-args", "--max-procs",
            "--max-chars", "--process-slot-var", "--eof", "--replace")
    # The arguments xargs appends or puts in place of -I's string are read from stdin:
    # unknown, like a substitution's value.
    words = _after_options(rest, "adEILnPs", long) or ["echo"]
    placeholder = short_value(rest, "I", ("--replace",)) or ("{}" if any(
        w.startswith("-i") for w in rest[:len(rest) - len(words)]) else None)
    if placeholder:
        words = [w.replace(placeholder, SUBSTITUTION) for w in words]
    return [[*words, SUBSTITUTION]]


def _find(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    found: list[list[str]] = []
    i = 0
    while i < len(rest):
        if rest[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(rest) and rest[end] not in (";", "+"):
                end += 1
            found.append([w.replace("{}", SUBSTITUTION) for w in rest[i + 1:end]])
            i = end
        i += 1
    return found


def _busybox(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    return [rest]


def _script(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    line = short_value(rest, "c", ("--command",))
    if line is not None:
        runs.scripts.append(line)
    else:
        _stdin(command, runs, as_code=False)  # a shell that reads its stdin
    return []


def _su(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    line = short_value(rest, "c", ("--command", "--session-command"))
    if line is not None:
        runs.scripts.append(line)
    else:
        _stdin(command, runs, as_code=False)
    return []


def _sudo(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    words = _after_options(rest, "ugCDhprtTU", _SUDO_LONG)
    if not words and any(w in ("-s", "-i", "--shell", "--login") for w in rest):
        _stdin(command, runs, as_code=False)  # `sudo -s <<< cmd`: a shell that reads stdin
    return [words]


_SUDO_LONG: Final = ("--user", "--group", "--chdir", "--host", "--prompt", "--role", "--type",
                     "--close-from", "--other-user", "--command-timeout")


def _eval(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    runs.scripts.append(" ".join(rest))
    return []


def _watch(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    words = _after_options(rest, "nq", ("--interval", "--equexit"))
    if "-x" in rest or "--exec" in rest:
        return [words]
    runs.scripts.append(" ".join(words))
    return []


def _ssh(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    words = _after_options(rest, "BbcDEeFIiJLlmOoPpQRSWw")
    if len(words) > 1:
        runs.scripts.append(" ".join(words[1:]))  # `ssh localhost CMD` runs CMD here too
    return []


def _expect(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    code = short_value(rest, "c")
    for text in (code, command.stdin):
        if text:
            runs.code.append(text)
            for spawned in re.findall(r"(?:^|[;\[\n{])\s*spawn\s+([^;\]\n]*)", text):
                runs.scripts.append(spawned.replace("-noecho", ""))
    return []


def _runner(subcommands: tuple[str, ...], short: str, long: tuple[str, ...]) -> _Handler:
    """`uv run`, `npx`, `poetry run` ...: after the subcommand and options, a command."""
    def handler(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
        if subcommands:
            if not rest or rest[0] not in subcommands:
                return []
            while rest and rest[0] in subcommands:  # `uv tool run`
                rest = rest[1:]
        return [_after_options(rest, short, long)]
    return handler


def _shell(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    clusters = [w for w in rest[:_first_operand(rest, "oO")] if re.fullmatch(r"[-+][A-Za-z]+", w)]
    words = _after_options(rest, "oO", ("--rcfile", "--init-file"))
    if any("c" in w for w in clusters if w.startswith("-")):
        if words:
            runs.scripts.append(words[0])
        return []
    if words and not any("s" in w for w in clusters) and not _reads_stdin(words[0]):
        if SUBSTITUTION in words[0] or words[0].startswith("/dev/fd/"):
            runs.unseen_stdin = True  # `bash <(…)`: a program this reader cannot see
        runs.files.append(words[0])
        return [words]  # a script file: its name is the program
    _stdin(command, runs, as_code=False)
    return []


def _reads_stdin(operand: str) -> bool:
    return operand in ("-", "/dev/stdin", "/proc/self/fd/0", "/dev/fd/0")


def _source(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    if rest:
        runs.files.append(rest[0])
    return []


def _at(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    """`at`, `batch`: a script from stdin (or `-f FILE`) run later."""
    script = short_value(rest, "f")
    if script is not None:
        runs.files.append(script)
    else:
        _stdin(command, runs, as_code=False)
    return []


def _git(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    """`git -c alias.x='!cmd'`, `-c core.pager=cmd`: configuration values that run commands."""
    for i, word in enumerate(rest[:-1]):
        if word == "-c" and "=" in rest[i + 1]:
            runs.scripts.append(rest[i + 1].split("=", 1)[1].lstrip("!"))
    return []


def _tmux(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    words = _after_options(rest, "LSf")
    if words and words[0] in ("new-session", "new", "new-window", "neww", "split-window",
                              "splitw", "respawn-pane", "respawnp", "respawn-window", "respawnw",
                              "run-shell", "run", "display-popup", "popup"):
        operands = _after_options(words[1:], "cefnstxylFTShw")
        if operands:
            runs.scripts.append(" ".join(operands))
    return []


def _screen(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    return [] if short_value(rest, "X") is not None else [_after_options(rest, "SpcTehsL")]


def _parallel(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    words = _after_options(rest, "jSI", ("--jobs",))
    end = next((i for i, w in enumerate(words) if w in (":::", "::::", ":::+")), len(words))
    return [words[:end]]


def _interpreter(name: str) -> str | None:
    return _INTERPRETERS.get(name)


def _interpreted(rest: list[str], command: SimpleCommand, runs: _Runs,
                 name: str) -> list[list[str]]:
    kind = _interpreter(name) or ""
    if kind == "deno" and rest[:1] == ["eval"]:
        runs.code.append(" ".join(rest[1:]))
        return []
    node = kind in ("node", "bun")
    code_long = tuple(k for k, v in _NODE_LONG.items() if v == "code") if node else ()
    value_long = tuple(k for k, v in _NODE_LONG.items() if v == "value") if node else ()
    words = _after_options(rest, _VALUE_FLAGS[kind] + _CODE_FLAGS[kind], code_long + value_long)
    leading = rest[:len(rest) - len(words)]  # options only: `python3 x.py -c y` runs x.py
    code = short_value(leading, _CODE_FLAGS[kind], code_long) if _CODE_FLAGS[kind] or node \
        else None
    if code is not None:
        runs.code.append(code)
        return []
    module = _python_module(rest) if kind == "python" else None
    if module is not None:
        program = CLI_PROGRAM if module[0] in _CLI_MODULES else module[0]
        return [[program, *module[1]]]
    if words and not _reads_stdin(words[0]):
        if SUBSTITUTION in words[0] or words[0].startswith("/dev/fd/"):
            runs.unseen_stdin = True  # `python3 <(…)`: a program this reader cannot see
        return [words]  # a script file: its name is the program
    _stdin(command, runs, as_code=True)
    return []


def _python_module(rest: list[str]) -> tuple[str, list[str]] | None:
    """`-m MODULE ARGS...` (also `-mMODULE`, `-um MODULE`): the module and its arguments."""
    for i, word in enumerate(rest):
        if not word.startswith("-") or word == "--":
            return None
        if re.fullmatch(r"-[A-Za-z]*m", word) and i + 1 < len(rest):
            return rest[i + 1], rest[i + 2:]
        if re.fullmatch(r"-[A-Za-z]*m.+", word) and "c" not in word.split("m", 1)[0]:
            return word.split("m", 1)[1], rest[i + 1:]
    return None


def _awk(rest: list[str], command: SimpleCommand, runs: _Runs, name: str) -> list[list[str]]:
    if short_value(rest, "f", ("--file",)) is None:
        words = _after_options(rest, "vF", ("--assign", "--field-separator"))
        if words:
            runs.code.append(words[0])
    return []


def _stdin(command: SimpleCommand, runs: _Runs, *, as_code: bool) -> None:
    """A shell or interpreter reading its program from stdin: a document, an echo, a pipe."""
    text = command.stdin
    upstream = command.upstream
    if text is None and upstream is not None and upstream.words \
            and program_name(upstream.words[0]) in ("echo", "printf"):
        text = printed(upstream.words)
    if text is None:
        runs.unseen_stdin = upstream is not None or any(
            r.op in ("<", "<>") for r in command.redirects)
        return
    if text is None and upstream is not None:
        text = upstream.stdin  # `cat <<EOF | sh`
    (runs.code if as_code else runs.scripts).append(text)


def printed(words: Sequence[str]) -> str:
    """Roughly what `echo ...` or `printf ...` print (escapes decoded)."""
    args = [w for w in words[1:] if not re.fullmatch(r"-[neE]+", w)]
    return decode_escapes(" ".join(args))


def _first_operand(words: Sequence[str], short: str) -> int:
    remaining = _after_options(words, short)
    return len(words) - len(remaining)


_HANDLERS: dict[str, _Handler] = {
    "sudo": _sudo,
    "doas": _plain("uC"), "nohup": _plain(), "setsid": _plain(), "time": _plain(),
    "builtin": _plain(), "unbuffer": _plain(), "caffeinate": _plain("tw"), "chronic": _plain(),
    "stdbuf": _plain("ioe", ("--input", "--output", "--error")),
    "ionice": _plain("cnp", ("--class", "--classdata")), "env": _env, "nice": _nice,
    "timeout": _timeout, "taskset": _taskset, "chrt": _first_operand_then_command(""),
    "flock": _flock, "command": _command, "exec": _exec, "xargs": _xargs, "find": _find,
    "busybox": _busybox, "script": _script, "su": _su, "runuser": _su, "eval": _eval,
    "watch": _watch, "ssh": _ssh, "expect": _expect,
    "uv": _runner(("run", "tool"), "pw", ("--python", "--with", "--with-requirements",
                                          "--project", "--directory", "--package", "--env-file",
                                          "--extra", "--group", "--index", "--from")),
    "uvx": _runner((), "pw", ("--python", "--with", "--from")),
    "pipx": _runner(("run",), "", ("--spec", "--python")),
    "npx": _runner((), "p", ("--package",)), "bunx": _runner((), "", ()),
    "poetry": _runner(("run",), "C", ("--directory",)), "pdm": _runner(("run",), "p", ()),
    "npm": _runner(("exec", "x"), "", ("--package", "--workspace")),
    "pnpm": _runner(("exec", "dlx"), "", ()), "yarn": _runner(("exec", "dlx"), "", ()),
    "source": _source, ".": _source, "at": _at, "batch": _at, "git": _git, "tmux": _tmux,
    "screen": _screen, "parallel": _parallel,
    "systemd-run": _plain("upEM", ("--unit", "--property", "--setenv", "--description",
                                   "--slice", "--machine", "--uid", "--gid",
                                   "--working-directory", "--on-calendar", "--on-active")),
    "strace": _plain("oeEpsuPIXa"), "ltrace": _plain("oeEpsuna"), "valgrind": _plain(),
    "pkexec": _plain("", ("--user",)), "chroot": _first_operand_then_command(""),
    "unshare": _plain("S", ("--setuid", "--setgid")), "nsenter": _plain("tSG"),
    "firejail": _plain(), "xvfb-run": _plain("nsfe"), "entr": _plain(), "sg": _su,
    "catchsegv": _plain(), "dbus-run-session": _plain(),
    "faketime": _first_operand_then_command(""),
}


def string_literals(code: str) -> list[str]:
    """The quoted strings of a program's text (Python, JavaScript, Perl, Ruby, shell-like),
    with literals joined by `+`, `.` or nothing but spaces folded into one (`"pi" + "w"`)."""
    pattern = r'"""(.*?)"""|\'\'\'(.*?)\'\'\'|"((?:[^"\\\n]|\\.)*)"|\'((?:[^\'\\\n]|\\.)*)\'' \
              r"|`((?:[^`\\]|\\.)*)`"
    found: list[str] = []
    end = -1
    for match in re.finditer(pattern, code, re.DOTALL):
        value = next(g for g in match.groups() if g is not None)
        if found and _CONCATENATION.fullmatch(code[end:match.start()]):
            found[-1] += value
        else:
            found.append(value)
        end = match.end()
    return found


_CONCATENATION: Final = re.compile(r"\s*(\+|\.|\.\.)?\s*")
