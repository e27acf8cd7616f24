"""The `piw-channels` command line: the one composition root, a thin shell over the library.

Quiet on success where cron runs it, `--json` where scripts read the output, one-line
`Error: ...` messages on stderr, and the documented exit codes (README, `state.exit_codes`).
Each command group lives in its own module with a `register(sub)` function; only the group of
the command being run is imported, so a cron `poll` loads neither the Pi bridge nor the demo.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from adapters.cli.packages import check_packages

__all__ = ["build_parser", "main", "run"]


check_packages()  # before anything imports `state` or `channels`: they may be someone else's

import apsw  # noqa: E402

from adapters.cli.errors import Terminated, UsageError  # noqa: E402
from state import crashes  # noqa: E402
from state.errors import StateError  # noqa: E402
from state.exit_codes import ExitCode  # noqa: E402
from state.files import default_path, translate  # noqa: E402
from state.version import VERSION  # noqa: E402

_Handler = Callable[[argparse.Namespace], int]
_Register = Callable[[Any], None]


def _database() -> _Register:
    from adapters.cli import database

    return database.register


def _decisions() -> _Register:
    from adapters.cli import decisions

    return decisions.register


def _setup() -> _Register:
    from adapters.cli import setup

    return setup.register


def _telegram() -> _Register:
    from adapters.cli import telegram

    return telegram.register


def _demo() -> _Register:
    from adapters.cli import demo

    return demo.register


def _pi() -> _Register:
    from adapters.cli import pi

    return pi.register


def _notify() -> _Register:
    from adapters.cli import notify

    return notify.register


def _audit() -> _Register:
    from adapters.cli import audit

    return audit.register


def _gate() -> _Register:
    from adapters.cli import gate

    return gate.register


def _hook() -> _Register:
    from adapters.cli import hook

    return hook.register


def _mcp() -> _Register:
    from adapters.cli import mcp

    return mcp.register


# Command -> the loader of the group that registers it (in help order).
_GROUPS: dict[str, Callable[[], _Register]] = {
    "init": _database, "verify": _database, "backup": _database, "status": _database,
    "ask": _decisions, "decisions": _decisions, "show": _decisions, "cancel": _decisions,
    "expire": _decisions, "notify": _notify, "setup": _setup, "poll": _telegram,
    "resend": _telegram, "demo": _demo, "pi": _pi, "gate": _gate, "hook": _hook,
    "audit": _audit, "mcp": _mcp,
}


class _Parser(argparse.ArgumentParser):
    """argparse with the README's one `Error:` line (and exit 2) instead of its usage text;
    every subcommand's parser is one too (argparse makes them of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        print(f"Error: {self.prog}: {message} (see: {self.prog} --help)", file=sys.stderr)
        raise SystemExit(ExitCode.USAGE)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every subcommand, or, when `command` names a known command, with that
    command's group only."""
    parser = _Parser(
        prog="piw-channels",
        description="Carry Pi Workflows human decisions over Telegram and Pi.",
        epilog="Exit codes: " + ", ".join(f"{code} {code.meaning}" for code in ExitCode) + ".",
    )
    parser.add_argument("--version", action="version", version=f"piw-channels {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    wanted = _GROUPS.get(command or "")
    loaders = [wanted] if wanted else list(dict.fromkeys(_GROUPS.values()))
    for load in loaders:
        load()(sub)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand word of an argument list (the first non-option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def run(argv: Sequence[str] | None = None) -> int:
    """Parse, dispatch, and map every known error to its exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(words)
    if command is None and "--version" in words:  # no command group needs loading for it
        print(f"piw-channels {VERSION}")
        return ExitCode.OK
    parser = build_parser(command)
    args = parser.parse_args(words)
    handler: _Handler = args.handler
    try:
        return handler(args)
    except StateError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return exc.exit_code
    except apsw.Error as exc:  # outside Database.read/write: a malformed file or a full disk
        error = translate(default_path(), exc)
        if error is None:
            raise
        print(f"Error: {error}", file=sys.stderr)
        return error.exit_code
    except UsageError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except Terminated as exc:
        return exc.exit_code
    except BrokenPipeError:  # `piw-channels decisions | head`: the reader has had enough
        _silence_stdout()
        return ExitCode.BROKEN_PIPE
    except Exception as exc:
        code = getattr(exc, "exit_code", None)
        if isinstance(code, int) and code != ExitCode.INTERNAL:  # a known error: its own line
            print(f"Error: {exc}", file=sys.stderr)
            return code
        return _internal_error(exc, command, verbose=bool(getattr(args, "verbose", False)))


def _internal_error(exc: Exception, command: str | None, *, verbose: bool) -> int:
    """A bug: one line naming its private crash report (`-v` prints the traceback too)."""
    print(f"Error: {crashes.report_line(exc, f'running {command}')}", file=sys.stderr)
    if verbose:
        print(crashes.format_report(exc, f"running {command}"), end="", file=sys.stderr)
    return ExitCode.INTERNAL


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main() -> None:
    """Console-script entry point."""
    code = run()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        code = ExitCode.BROKEN_PIPE
    sys.exit(code)
