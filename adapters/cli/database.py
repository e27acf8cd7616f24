"""The database commands: `init`, `verify`, `backup` and `status`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from adapters.cli.errors import UsageError
from state.database import Database
from state.errors import RESET_INSTRUCTION, DatabaseMissing
from state.exit_codes import EXIT_INCOMPATIBLE, EXIT_OK
from state.files import default_path


def print_json(value: Any) -> None:
    """Pretty, key-sorted JSON on stdout (the `--json` form of every command)."""
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
        print_json({"ok": report.ok, "path": report.path, "schema": report.schema,
                     "integrity": report.integrity, "foreign_keys": report.foreign_keys})
    elif not report.ok:
        print(f"Error: {report.path}: integrity {report.integrity}; "
              f"foreign keys {report.foreign_keys}. {RESET_INSTRUCTION}", file=sys.stderr)
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
    # Heavy imports only when used.
    from adapters.cli.status_text import render_status, with_iso
    from channels.config.loading import load_config, resolve_config_dir
    from channels.errors import ChannelsError
    from channels.status import status_report

    try:
        db = Database.open_reader()
    except DatabaseMissing:
        if args.json:
            print_json({"database": "missing", "path": str(default_path())})
        else:
            print(f"no database at {default_path()} (run: piw-channels init)")
        return EXIT_OK
    with db:
        report = status_report(db)
    if args.json:
        print_json(with_iso(report))
        return EXIT_OK
    try:
        config = load_config()
        profiles, problem = ([] if config is None else list(config.profiles)), None
    except ChannelsError as exc:  # status still shows the database; the config is one line
        profiles, problem = [], str(exc)
    print(render_status(report, str(resolve_config_dir()), profiles, problem))
    return EXIT_OK


def register(sub: Any) -> None:
    """Add the database commands to the parser."""
    p = sub.add_parser("init", help="create the state database if missing and print its path")
    p.set_defaults(handler=cmd_init)

    p = sub.add_parser("verify", help="check schema identity, integrity and foreign keys")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_verify)

    p = sub.add_parser("backup", help="copy the database to a new verified 0600 file")
    p.add_argument("dest", type=Path, help="destination file (must not exist)")
    p.set_defaults(handler=cmd_backup)

    p = sub.add_parser("status", help="database and channel health (no private ids)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_status)
