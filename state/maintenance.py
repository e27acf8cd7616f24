"""Read-only verification, WAL-aware backup, what `status` checks of the database file, and a
privacy-safe diagnostics report."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import apsw

from state.database import Database
from state.errors import (
    CORRUPT_INSTRUCTION,
    DatabaseCorrupt,
    IncompatibleDatabase,
    PermissionProblem,
    StateError,
)
from state.files import corrupt, lost

__all__ = ["backup", "damage", "diagnostics", "missing_problems", "verify"]


@dataclass(frozen=True, slots=True)
class _VerifyReport:
    """Outcome of `verify`: schema identity, integrity and foreign keys."""

    path: str
    schema: str
    integrity: str
    foreign_keys: str

    @property
    def ok(self) -> bool:
        return self.schema == "ok" and self.integrity == "ok" and self.foreign_keys == "ok"

    @property
    def problem(self) -> str:
        """The line for a report that is not ok: what the checks found, and what to do."""
        return (f"{self.path}: integrity {self.integrity}; foreign keys {self.foreign_keys}."
                f" {CORRUPT_INSTRUCTION}")


def _integrity_problems(conn: apsw.Connection, *, quick: bool = False) -> list[str]:
    """Rows of `PRAGMA integrity_check` other than 'ok' (a page too damaged to read counts).
    `quick` runs `quick_check` instead (every page and row, but not whether each index
    matches its table): several times faster on a large database, for `status`."""
    pragma = "quick_check" if quick else "integrity_check"
    try:
        return [str(r[0]) for r in conn.execute(f"PRAGMA {pragma}") if r[0] != "ok"]
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        return [f"corrupt: {exc}"]


def damage(db: Database) -> DatabaseCorrupt | None:
    """The malformed-file error when `PRAGMA quick_check` (the fast check `status` runs)
    finds damage in the open database, else None."""
    found = _integrity_problems(db.conn, quick=True)
    return corrupt(db.path, found[0]) if found else None


def missing_problems(path: Path) -> list[StateError]:
    """Why the missing database at `path` needs attention: one existed there (deleted or
    moved), or no command could create it (its directory is not writable by this user)."""
    gone = lost(path)
    return ([] if gone is None else [gone]) + _uncreatable(path)


def _uncreatable(path: Path) -> list[StateError]:
    probe = path.parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if os.access(probe, os.W_OK | os.X_OK):
        return []
    return [PermissionProblem(
        f"{path} cannot be created: {probe} is not writable by this user; fix its owner or"
        f" mode (for example: chmod u+rwx {probe}), then run: piw-channels init")]


def _foreign_key_problems(conn: apsw.Connection) -> list[str]:
    """One line per row that `PRAGMA foreign_key_check` reports."""
    try:
        return [
            f"{table} rowid {rowid} -> {parent}"
            for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check")
        ]
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        return [f"corrupt: {exc}"]


def _one_line(problems: list[str]) -> str:
    # integrity_check rows can hold newlines ("*** in database main ***\nPage 5: ...").
    return "; ".join(" ".join(p.split()) for p in problems)


def verify(path: Path | None = None) -> _VerifyReport:
    """Open read-only and run the full checks. Raises when the schema is incompatible."""
    with Database.open_reader(path) as db:
        integrity = _integrity_problems(db.conn)
        foreign = _foreign_key_problems(db.conn)
        return _VerifyReport(
            path=str(db.path),
            schema="ok",
            integrity="ok" if not integrity else _one_line(integrity[:5]),
            foreign_keys="ok" if not foreign else _one_line(foreign[:5]),
        )


def backup(dest: Path, path: Path | None = None) -> _VerifyReport:
    """Copy the live database with the SQLite backup API into a new 0600 file, then verify it."""
    dest = dest.absolute()
    if dest.exists():
        raise PermissionProblem(f"{dest} already exists; choose a new backup file")
    if not dest.parent.is_dir():
        raise PermissionProblem(f"{dest.parent} is not a directory")
    with Database.open_reader(path) as source:
        try:
            os.close(os.open(dest, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except OSError as exc:
            raise PermissionProblem(f"cannot create {dest}: {exc.strerror}") from exc
        try:
            _copy(source.conn, dest)
        except BaseException:
            _remove_partial(dest)
            raise
    report = _verify_copy(dest)
    _close_wal(dest)
    if not report.ok:
        raise IncompatibleDatabase(
            f"backup {dest} failed verification: integrity {report.integrity},"
            f" foreign keys {report.foreign_keys}"
        )
    return report


def _copy(source: apsw.Connection, dest: Path) -> None:
    target = apsw.Connection(str(dest))
    try:
        with target.backup("main", source, "main") as step:
            while not step.done:
                step.step(256)
    finally:
        target.close()


def _close_wal(dest: Path) -> None:
    # The copy is ours alone: closing its last connection checkpoints and removes -wal/-shm,
    # leaving one self-contained file.
    conn = apsw.Connection(str(dest), flags=apsw.SQLITE_OPEN_READWRITE)
    conn.execute("PRAGMA user_version").fetchall()  # opens the file so close can clean up
    conn.close()


def _remove_partial(dest: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{dest}{suffix}").unlink(missing_ok=True)


def _verify_copy(dest: Path) -> _VerifyReport:
    with Database.open_reader(dest, private_directory=False) as copy:
        integrity = _integrity_problems(copy.conn)
        foreign = _foreign_key_problems(copy.conn)
    return _VerifyReport(
        path=str(dest),
        schema="ok",
        integrity="ok" if not integrity else "; ".join(integrity[:5]),
        foreign_keys="ok" if not foreign else "; ".join(foreign[:5]),
    )


@dataclass(frozen=True, slots=True)
class _Diagnostics:
    """Counts and statuses only: no actor, chat, user or owner identifiers."""

    path: str
    size_bytes: int
    schema: str
    integrity: str
    foreign_keys: str
    active_leases: dict[str, int]
    unsettled_effects: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def diagnostics(db: Database, *, full_checks: bool = True) -> _Diagnostics:
    """Report size, identity, integrity, foreign keys, active leases and unsettled effects."""
    conn = db.conn
    now = db.clock.now_ms()
    size = sum(
        Path(f"{db.path}{s}").stat().st_size
        for s in ("", "-wal")
        if Path(f"{db.path}{s}").exists()
    )
    integrity = _integrity_problems(conn) if full_checks else []
    foreign = _foreign_key_problems(conn) if full_checks else []
    leases = {
        str(kind): int(count)
        for kind, count in conn.execute(
            "SELECT r.resource_type, count(*) FROM leases l JOIN resources r USING (resource_id)"
            " WHERE l.owner_type IS NOT NULL AND l.expires_at > ? GROUP BY r.resource_type",
            (now,),
        )
    }
    effects = {
        str(kind): int(count)
        for kind, count in conn.execute(
            "SELECT effect_type || ':' || status, count(*) FROM effects"
            " WHERE status IN ('pending', 'applying', 'ambiguous') GROUP BY 1"
        )
    }
    return _Diagnostics(
        path=str(db.path),
        size_bytes=size,
        schema="ok",
        integrity="not checked" if not full_checks else ("ok" if not integrity else "failed"),
        foreign_keys="not checked" if not full_checks else ("ok" if not foreign else "failed"),
        active_leases=leases,
        unsettled_effects=effects,
    )
