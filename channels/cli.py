"""The `piw-channels` command line: a thin shell over the library.

Quiet on success where cron runs it, `--json` where scripts read the output, one-line
`Error: ...` messages on stderr, and the documented exit codes (README, `state.errors`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from state.database import Database, default_path
from state.errors import (
    EXIT_INCOMPATIBLE,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    DatabaseMissing,
    StateError,
)

VERSION = "0.1.0"

Handler = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """Bad command-line input detected after parsing (exit 2)."""

    exit_code = EXIT_USAGE


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def cmd_init(args: argparse.Namespace) -> int:
    """Create the database when missing (idempotent) and print its path."""
    with Database.open_writer() as db:
        print(db.path)
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    """Schema identity, integrity_check and foreign_key_check."""
    from state import maintenance

    report = maintenance.verify()
    if args.json:
        _print_json({"ok": report.ok, "path": report.path, "schema": report.schema,
                     "integrity": report.integrity, "foreign_keys": report.foreign_keys})
    elif not report.ok:
        print(f"Error: {report.path}: integrity {report.integrity}; "
              f"foreign keys {report.foreign_keys}", file=sys.stderr)
    else:
        print(f"{report.path}: ok")
    return EXIT_OK if report.ok else EXIT_INCOMPATIBLE


def cmd_backup(args: argparse.Namespace) -> int:
    """Backup API copy into a new 0600 file, then verify the copy."""
    from state import maintenance

    if args.dest.exists():
        raise UsageError(f"{args.dest} already exists; choose a new backup file")
    report = maintenance.backup(args.dest)
    print(report.path)
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    """Database and channel health, with no private identifiers."""
    from channels.status import render_status, status_report  # heavy imports only when used

    try:
        db = Database.open_reader()
    except DatabaseMissing:
        if args.json:
            _print_json({"database": "missing", "path": str(default_path())})
        else:
            print(f"no database at {default_path()} (run: piw-channels init)")
        return EXIT_OK
    with db:
        report = status_report(db)
    if args.json:
        _print_json(report)
    else:
        print(render_status(report))
    return EXIT_OK


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every subcommand, or, when `command` names a known command group, with
    that group only (so a cron `poll` does not import the Pi bridge or the demo's server)."""
    parser = argparse.ArgumentParser(
        prog="piw-channels",
        description="Carry Pi Workflows human decisions over Telegram and Pi.",
        epilog="Exit codes: 0 ok, 1 internal error, 2 usage, 65 incompatible or corrupt "
        "database, 75 temporary condition, 77 permission problem, 78 invalid configuration.",
    )
    parser.add_argument("--version", action="version", version=f"piw-channels {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("init", help="create the state database if missing and print its path")
    p.set_defaults(handler=cmd_init)

    p = sub.add_parser("verify", help="check schema identity, integrity and foreign keys")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_verify)

    p = sub.add_parser("backup", help="copy the database to a new verified 0600 file")
    p.add_argument("dest", type=_path, help="destination file (must not exist)")
    p.set_defaults(handler=cmd_backup)

    p = sub.add_parser("status", help="database and channel health (no private ids)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_status)

    for register in _extensions(command):
        register(sub)
    return parser


def _path(value: str) -> Any:
    from pathlib import Path

    return Path(value)


# Command -> the module that registers it. Only the module of the command being run is
# imported; `--help`, a typo or no command loads them all.
_COMMAND_MODULES = {
    "ask": "channels.decision_cli", "decisions": "channels.decision_cli",
    "show": "channels.decision_cli", "cancel": "channels.decision_cli",
    "expire": "channels.decision_cli", "setup": "channels.setup_cli",
    "poll": "channels.telegram_cli", "resend": "channels.telegram_cli",
    "demo": "channels.demo_cli", "pi": "adapters.pi.cli",
}
_BUILT_IN = {"init", "verify", "backup", "status"}


def _extensions(command: str | None = None) -> list[Callable[[Any], None]]:
    """The `register` functions of the command groups to load."""
    if command in _BUILT_IN:
        return []
    wanted = _COMMAND_MODULES.get(command or "")
    names = [wanted] if wanted else list(dict.fromkeys(_COMMAND_MODULES.values()))
    return [importlib.import_module(name).register for name in names]


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand word of an argument list (the first non-option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def run(argv: Sequence[str] | None = None) -> int:
    """Parse, dispatch, and map every known error to its exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_of(words))
    args = parser.parse_args(words)
    handler: Handler = args.handler
    try:
        return handler(args)
    except StateError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return exc.exit_code
    except UsageError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        code = getattr(exc, "exit_code", None)
        print(f"Error: {exc}", file=sys.stderr)
        return code if isinstance(code, int) else EXIT_INTERNAL


def main() -> None:
    """Console-script entry point."""
    sys.exit(run())
