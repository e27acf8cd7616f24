"""The database commands: `init`, `verify`, `backup` and `status`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import apsw

from adapters.cli.errors import UsageError
from state.database import Database
from state.errors import DatabaseMissing, StateError
from state.exit_codes import ExitCode
from state.files import default_path, disk_full, translate

__all__ = ["register"]


def _print_json(value: Any) -> None:
    """Pretty, key-sorted JSON on stdout (the `--json` form of every command)."""
    print(json.dumps(value, indent=2, sort_keys=True))


def _cmd_init(args: argparse.Namespace) -> int:
    """Create the database when missing (idempotent) and print its path."""
    existed = default_path().exists()
    with Database.open_writer(recreate=True) as db:  # the explicit way to start afresh
        if args.json:
            _print_json({"path": str(db.path), "created": not existed})
        else:
            print(db.path)
    return ExitCode.OK


def _cmd_verify(args: argparse.Namespace) -> int:
    """Schema identity, integrity_check and foreign_key_check."""
    from state import maintenance

    report = maintenance.verify()
    if args.json:
        _print_json({"ok": report.ok, "path": report.path, "schema": report.schema,
                     "integrity": report.integrity, "foreign_keys": report.foreign_keys})
    elif not report.ok:
        print(f"Error: {report.problem}", file=sys.stderr)
    else:
        print(f"{report.path}: ok")
    return ExitCode.OK if report.ok else ExitCode.INCOMPATIBLE


def _cmd_backup(args: argparse.Namespace) -> int:
    """Backup API copy into a new 0600 file, then verify the copy."""
    from state import maintenance

    if args.dest.exists():
        raise UsageError(f"{args.dest} already exists; choose a new backup file")
    if not args.dest.absolute().parent.is_dir():
        raise UsageError(f"{args.dest.absolute().parent} is not a directory; create it first"
                         " or choose another place for the backup")
    report = maintenance.backup(args.dest)
    if args.json:
        _print_json({"ok": report.ok, "path": report.path, "source": str(default_path()),
                    "schema": report.schema, "integrity": report.integrity,
                    "foreign_keys": report.foreign_keys})
    else:
        print(report.path)
    return ExitCode.OK


def _cmd_status(args: argparse.Namespace) -> int:
    """Database and channel health, with no private identifiers; a health check: it exits
    with the highest code of what needs attention (0 only when nothing does)."""
    # Heavy imports only when used.
    from adapters.cli.status_text import attention_lines, render_status, with_iso
    from channels.config.loading import resolve_config_dir
    from channels.reports import health
    from channels.reports.status import status_report
    from state import maintenance

    profiles, config_problem = _config_state()
    config_item = [] if config_problem is None else health.conditions(
        {"now": 0, "channels": [], "database": {}}, [], config_problem)
    try:
        db = Database.open_reader()
    except DatabaseMissing:
        problems = maintenance.missing_problems(default_path())
        gone = any(isinstance(p, DatabaseMissing) for p in problems)  # it existed there
        items = config_item + [_item(p) for p in problems]
        if args.json:
            _print_json({"database": "missing", "path": str(default_path()),
                        "needs_attention": items})
        else:
            advice = "" if gone else " (run: piw-channels init)"
            print("\n".join([f"no database at {default_path()}{advice}",
                             *(attention_lines(items, 0, "") if items else [])]))
        return health.exit_code(items)
    except StateError as exc:  # corrupt, foreign, unreadable: the one thing to fix first
        return _database_problem(args, config_item, exc)
    try:
        with db:
            report = status_report(db)
            damage = maintenance.damage(db)
    except StateError as exc:
        return _database_problem(args, config_item, exc)
    except apsw.Error as exc:
        error = translate(default_path(), exc)
        if error is None:
            raise
        return _database_problem(args, config_item, error)
    if damage is not None:
        return _database_problem(args, config_item, damage)
    items = health.conditions(report, profiles, config_problem) + _disk(default_path())
    report = {**report, "needs_attention": items}
    if args.json:
        _print_json(with_iso(report))
    else:
        print(render_status(report, str(resolve_config_dir()), items))
    return health.exit_code(items)


def _config_state() -> tuple[list[str], tuple[str, int] | None]:
    """The configured Telegram profiles, and why the configuration cannot be read."""
    from channels.config.loading import load_config
    from channels.errors import ChannelsError

    try:
        config = load_config()
    except ChannelsError as exc:  # status still shows the database; the config is one line
        return [], (str(exc), exc.exit_code)
    except OSError as exc:
        return [], (f"the configuration cannot be read: {exc.strerror}", ExitCode.TEMPORARY)
    return ([] if config is None else list(config.profiles)), None


def _database_problem(args: argparse.Namespace, before: list[dict[str, Any]],
                      exc: StateError) -> int:
    from channels.reports import health

    items = [*before, _item(exc)]
    if args.json:
        _print_json({"database": "unusable", "path": str(default_path()),
                    "needs_attention": items})
    else:  # nothing else can be shown: one line each, as every command says it
        for item in items:
            print(f"Error: {item['message']}", file=sys.stderr)
    return health.exit_code(items)


def _item(problem: StateError) -> dict[str, Any]:
    """A database problem as `status` lists what needs attention."""
    return {"kind": "database", "exit_code": problem.exit_code, "message": str(problem)}


def _disk(path: Path) -> list[dict[str, Any]]:
    """The database's file system has no room left: every write would fail (75)."""
    full = disk_full(path)
    return [] if full is None else [{"kind": "disk", "exit_code": full.exit_code,
                                     "message": str(full)}]


def register(sub: Any) -> None:
    """Add the database commands to the parser."""
    p = sub.add_parser("init", help="create the state database if missing and print its path")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_init)

    p = sub.add_parser("verify", help="check schema identity, integrity and foreign keys")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_verify)

    p = sub.add_parser("backup", help="copy the database to a new verified 0600 file")
    p.add_argument("dest", type=Path, help="destination file (must not exist)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_backup)

    p = sub.add_parser("status", help="database and channel health (no private ids)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_status)
