"""The `piw-channels` command line: a thin shell over the library.

Quiet on success where cron runs it, `--json` where scripts read the output, one-line
`Error: ...` messages on stderr, and the documented exit codes (README, `state.errors`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from state import maintenance
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


def build_parser() -> argparse.ArgumentParser:
    """All subcommands, each with help text."""
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

    for register in _extensions():
        register(sub)
    return parser


def _path(value: str) -> Any:
    from pathlib import Path

    return Path(value)


def _extensions() -> list[Callable[[Any], None]]:
    """Command groups defined next to the features they drive."""
    from adapters.pi import cli as pi_cli
    from channels import decision_cli, demo_cli, setup_cli, telegram_cli

    return [decision_cli.register, setup_cli.register, telegram_cli.register, demo_cli.register,
            pi_cli.register]


def run(argv: Sequence[str] | None = None) -> int:
    """Parse, dispatch, and map every known error to its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
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
