"""Opening state.sqlite: secure creation, connection settings, schema identity, transactions.

A writer connection creates the database on first use (directory 0700, file 0600, created
before SQLite touches it); a reader never creates anything and runs with `query_only`. Both
refuse a database whose identity differs from the compiled DDL, without modifying it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import apsw

from state.clock import Clock, Entropy, SystemClock, SystemEntropy
from state.ddl import DDL
from state.errors import (
    RESET_INSTRUCTION,
    DatabaseBusy,
    DatabaseCorrupt,
    DatabaseMissing,
    DiskFull,
    IncompatibleDatabase,
    PermissionProblem,
    StateError,
)
from state.schema import (
    APPLICATION_ID,
    DDL_DIGEST,
    SCHEMA_NAME,
    SCHEMA_VERSION,
    expected_objects,
)
from state.version import VERSION

T = TypeVar("T")

STATE_RELATIVE_PATH = Path(".pi/agent/workflows/state.sqlite")
BUSY_TIMEOUT_MS = 5000
COMMON_PRAGMAS = (
    ("foreign_keys", "ON"),
    ("journal_mode", "WAL"),
    ("synchronous", "FULL"),
    ("wal_autocheckpoint", "1000"),
    ("journal_size_limit", "67108864"),
)


def default_path() -> Path:
    """The one production location: ~/.pi/agent/workflows/state.sqlite."""
    return Path.home() / STATE_RELATIVE_PATH


def legacy_paths(db_path: Path) -> list[Path]:
    """Old storage locations that must not be read, imported or deleted."""
    workflows = db_path.parent
    return [
        workflows / "runs",
        workflows / "decisions",
        workflows / "controllers",
        Path.home() / ".config" / "pi-workflows" / "telegram-state.sqlite",
    ]


def _incompatible(path: Path, detail: str) -> IncompatibleDatabase:
    return IncompatibleDatabase(f"{path}: {detail}. {RESET_INSTRUCTION}")


def _check_private(path: Path, *, directory: bool) -> None:
    """Refuse a path that group or others can access, that its owner cannot read and write,
    that another user owns, or that is the wrong kind of file."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if directory and not stat.S_ISDIR(info.st_mode):
        raise PermissionProblem(f"{path} is not a directory")
    if not directory and not stat.S_ISREG(info.st_mode):
        raise PermissionProblem(f"{path} is not a regular file; move it away")
    mode = stat.S_IMODE(info.st_mode)
    fix = "700" if directory else "600"
    if mode & 0o077:
        raise PermissionProblem(
            f"{path} is accessible by group or others (mode {mode:04o}); fix: chmod {fix} {path}"
        )
    needed = 0o700 if directory else 0o600
    if mode & needed != needed:
        # A -wal or -shm left 0400 by a database that was briefly 0400 makes every writer fail
        # with "attempt to write a readonly database", naming neither the file nor the fix.
        raise PermissionProblem(
            f"{path} has mode {mode:04o}, but it must be {needed:04o} like the database;"
            f" fix: chmod {fix} {path}"
        )
    if info.st_uid != os.geteuid():
        raise PermissionProblem(
            f"{path} belongs to another user (uid {info.st_uid}); fix: chown"
            f" {os.geteuid()} {path}"
        )


def check_modes(db_path: Path, *, private_directory: bool = True) -> None:
    """Directory 0700 and the database, -wal and -shm files 0600, all owned by this user."""
    if private_directory:
        _check_private(db_path.parent, directory=True)
    for suffix in ("", "-wal", "-shm"):
        _check_private(Path(f"{db_path}{suffix}"), directory=False)


def _free_bytes(directory: Path) -> int | None:
    try:
        info = os.statvfs(directory)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


def _disk_full(path: Path) -> DiskFull:
    free = _free_bytes(path.parent)
    room = "" if free is None else f" ({free} bytes free)"
    return DiskFull(
        f"the disk is full: cannot write {path}: the file system holding {path.parent} has no"
        f" room{room}; nothing was lost: free some space there, then run the command again"
    )


def corrupt(path: Path, exc: BaseException) -> DatabaseCorrupt:
    """The one-line error for a malformed database file (with the reset instruction)."""
    return DatabaseCorrupt(
        f"{path}: the database file is malformed (SQLite: {exc}); nothing more was written"
        f" to it. {RESET_INSTRUCTION}"
    )


def translate(path: Path, exc: BaseException) -> StateError | None:
    """The state error for an apsw failure that is about the file, not the command: a
    malformed database (65) or a full disk (75). None for anything else."""
    if isinstance(exc, apsw.CorruptError | apsw.NotADBError):
        return corrupt(path, exc)
    if isinstance(exc, apsw.FullError):
        return _disk_full(path)
    if isinstance(exc, apsw.IOError) and _free_bytes(path.parent) == 0:
        return _disk_full(path)  # a -wal or -shm that could not grow: "disk I/O error"
    return None


def _os_error(path: Path, exc: OSError) -> StateError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return _disk_full(path)
    if exc.errno == errno.EROFS:
        return PermissionProblem(f"cannot create {path}: the file system is read-only")
    return PermissionProblem(f"cannot create {path}: {exc.strerror}")


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _open_failure(db_path: Path, exc: Exception) -> PermissionProblem:
    """SQLite could not open the database or its -wal/-shm files for what it needs."""
    if _read_only_fs(db_path.parent):
        return PermissionProblem(
            f"cannot open {db_path}: the file system is read-only (a WAL database needs to"
            " write its -wal and -shm files even to read)"
        )
    return PermissionProblem(f"cannot open {db_path}: {exc}; check that you own the"
                             " directory and its files")


def _create_file(db_path: Path) -> None:
    """Create the directory (0700) and an empty database file (0600) before SQLite opens it."""
    parent = db_path.parent
    try:
        if not parent.exists():
            parent.mkdir(mode=0o700, parents=True)
            parent.chmod(0o700)  # mkdir honours the umask; the mode must be exact
        _check_private(parent, directory=True)
        if legacy := [p for p in legacy_paths(db_path) if p.exists()]:
            names = ", ".join(str(p) for p in legacy)
            raise _incompatible(db_path, f"old workflow storage exists ({names})")
        fd = os.open(db_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
    except FileExistsError:
        return  # another process created it first; it initializes under an exclusive lock
    except OSError as exc:
        raise _os_error(db_path, exc) from exc


@contextmanager
def savepoint(conn: apsw.Connection, name: str = "unit") -> Iterator[None]:
    """A unit inside the caller's write transaction: an exception undoes only the unit's own
    writes (and propagates); the transaction goes on and commits the rest."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        conn.execute(f"ROLLBACK TO {name}")
        conn.execute(f"RELEASE {name}")
        raise
    conn.execute(f"RELEASE {name}")


@dataclass
class Database:
    """One apsw connection to state.sqlite with its injected clock and entropy."""

    path: Path
    conn: apsw.Connection
    readonly: bool
    clock: Clock = field(default_factory=SystemClock)
    entropy: Entropy = field(default_factory=SystemEntropy)
    busy_attempts: int = 3
    _schema_cookie: int = 0
    _corrupt: StateError | None = None  # once a malformed page was met, nothing more is written

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open_writer(
        cls,
        path: Path | None = None,
        *,
        clock: Clock | None = None,
        entropy: Entropy | None = None,
    ) -> Database:
        """Open for writing, creating the database exactly as `init` does when it is missing."""
        db_path = path or default_path()
        if not db_path.exists():
            _create_file(db_path)
        check_modes(db_path)
        db = cls._connect(db_path, readonly=False, clock=clock, entropy=entropy)
        return db._prepare(db._initialize_if_empty, db._verify_identity, db._apply_pragmas)

    @classmethod
    def open_reader(
        cls,
        path: Path | None = None,
        *,
        clock: Clock | None = None,
        entropy: Entropy | None = None,
        private_directory: bool = True,
    ) -> Database:
        """Open read-only (`query_only`); never creates, repairs or checkpoints.

        `private_directory=False` is for backup copies, which may sit in a shared folder.
        """
        db_path = path or default_path()
        if not db_path.exists():
            raise DatabaseMissing(f"no state database at {db_path}; run: piw-channels init")
        check_modes(db_path, private_directory=private_directory)
        db = cls._connect(db_path, readonly=True, clock=clock, entropy=entropy)
        return db._prepare(db._verify_identity, db._apply_pragmas)

    def _prepare(self, *steps: Callable[[], None]) -> Database:
        """Run the opening steps; on any failure close the connection (nothing written)."""
        try:
            for step in steps:
                step()
        except (apsw.CantOpenError, apsw.ReadOnlyError) as exc:
            self.close()
            raise _open_failure(self.path, exc) from exc
        except apsw.Error as exc:
            translated = self._translate(exc)
            self.close()
            if translated is None:
                raise
            raise translated from exc
        except BaseException:
            self.close()
            raise
        return self

    @classmethod
    def _connect(
        cls, db_path: Path, *, readonly: bool, clock: Clock | None, entropy: Entropy | None
    ) -> Database:
        try:
            conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READWRITE)
        except apsw.CantOpenError as exc:
            raise PermissionProblem(f"cannot open {db_path}: {exc}") from exc
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        if readonly:
            # Closing the last connection would checkpoint the WAL into the main file: a write.
            conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
            conn.execute("PRAGMA query_only = ON")
        return cls(
            path=db_path,
            conn=conn,
            readonly=readonly,
            clock=clock or SystemClock(),
            entropy=entropy or SystemEntropy(),
        )

    def _apply_pragmas(self) -> None:
        for name, value in COMMON_PRAGMAS:
            got = self.conn.execute(f"PRAGMA {name} = {value}").get
            if name == "journal_mode" and str(got).lower() != "wal":
                raise _incompatible(self.path, f"journal mode is {got}, expected wal")

    def _initialize_if_empty(self) -> None:
        """Create the schema in a new file; exactly one concurrent creator does the work."""
        if self._read_header_int("user_version") != 0 or self._has_objects():
            return
        try:
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("BEGIN EXCLUSIVE")
        except apsw.BusyError as exc:
            raise DatabaseBusy(f"{self.path} is being created by another process") from exc
        try:
            if self.conn.execute("PRAGMA user_version").get == 0 and not self._has_objects():
                self._create_schema()
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def _create_schema(self) -> None:
        now = self.clock.now_ms()
        self.conn.execute(DDL)
        self.conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        self.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self.conn.execute(
            "INSERT INTO schema_meta (id, schema_name, schema_version, schema_digest, app_version,"
            " created_at, updated_at) VALUES (1, :name, :version, :digest, :app, :now, :now)",
            {
                "name": SCHEMA_NAME,
                "version": SCHEMA_VERSION,
                "digest": DDL_DIGEST,
                "app": VERSION,
                "now": now,
            },
        )

    # -- identity ------------------------------------------------------------------------------

    def _read_header_int(self, pragma: str) -> int:
        try:
            return int(self.conn.execute(f"PRAGMA {pragma}").get)
        except (apsw.NotADBError, apsw.CorruptError) as exc:
            raise _incompatible(self.path, "the file is not a SQLite database") from exc

    def _has_objects(self) -> bool:
        return bool(self.conn.execute("SELECT count(*) FROM sqlite_schema").get)

    def _verify_identity(self) -> None:
        """Compare header, schema_meta and every live schema object with the compiled DDL."""
        app_id = self._read_header_int("application_id")
        if app_id != APPLICATION_ID:
            raise _incompatible(
                self.path, f"application_id is {app_id:#x}, expected {APPLICATION_ID:#x}"
            )
        version = self._read_header_int("user_version")
        if version != SCHEMA_VERSION:
            raise _incompatible(self.path, f"user_version {version} is not supported")
        self._verify_objects()
        self._verify_meta()
        self._schema_cookie = int(self.conn.execute("PRAGMA schema_version").get)

    def _verify_objects(self) -> None:
        live = {
            name: (kind, table, sql)
            for kind, name, table, sql in self.conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_schema"
                " WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
            )
        }
        expected = expected_objects()
        if extra := sorted(set(live) - set(expected)):
            raise _incompatible(self.path, f"unexpected schema objects: {', '.join(extra)}")
        if missing := sorted(set(expected) - set(live)):
            raise _incompatible(self.path, f"missing schema objects: {', '.join(missing)}")
        if changed := sorted(name for name in expected if live[name] != expected[name]):
            raise _incompatible(self.path, f"changed schema objects: {', '.join(changed)}")

    def _verify_meta(self) -> None:
        rows = self.conn.execute(
            "SELECT id, schema_name, schema_version, schema_digest FROM schema_meta"
        ).fetchall()
        if rows != [(1, SCHEMA_NAME, SCHEMA_VERSION, DDL_DIGEST)]:
            raise _incompatible(self.path, "the schema_meta row is missing or changed")

    # -- transactions --------------------------------------------------------------------------

    def write(self, command: Callable[[apsw.Connection], T]) -> T:
        """Run `command` in one BEGIN IMMEDIATE transaction; retry only a busy lock.

        Any exception rolls the whole command back. `command` must be safe to run again
        (it is re-run from the start after a busy retry).
        """
        if self.readonly:
            raise PermissionProblem("this connection is read-only")
        if self._corrupt is not None:
            raise self._corrupt
        try:
            return self._write_once(command)
        except apsw.BusyError as exc:
            if self.busy_attempts <= 1:
                raise self._busy() from exc
        except (apsw.ReadOnlyError, apsw.CantOpenError) as exc:
            raise self._unwritable(exc) from exc
        except apsw.Error as exc:
            translated = self._translate(exc)
            if translated is None:
                raise
            raise translated from exc
        # Contended: bounded, jittered retries (tenacity is imported only on this path).
        from tenacity import (
            Retrying,
            retry_if_exception_type,
            stop_after_attempt,
            wait_random_exponential,
        )

        try:
            for attempt in Retrying(
                stop=stop_after_attempt(self.busy_attempts - 1),
                wait=wait_random_exponential(multiplier=0.05, max=1.0),
                retry=retry_if_exception_type(apsw.BusyError),
                reraise=True,
            ):
                with attempt:
                    return self._write_once(command)
        except apsw.BusyError as exc:
            raise self._busy() from exc
        except apsw.Error as exc:
            translated = self._translate(exc)
            if translated is None:
                raise
            raise translated from exc
        raise AssertionError("unreachable: tenacity either returns or re-raises")

    def _translate(self, exc: apsw.Error) -> StateError | None:
        translated = translate(self.path, exc)
        if isinstance(translated, DatabaseCorrupt):
            # Stop here: no later write, and closing must not checkpoint into the damaged file.
            self._corrupt = translated
            self.conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
        return translated

    def _unwritable(self, exc: apsw.Error) -> StateError:
        # The modes may have changed since opening (a -shm left 0400): name the file and fix.
        check_modes(self.path)
        return PermissionProblem(f"cannot write {self.path}: {exc}")

    def _busy(self) -> DatabaseBusy:
        return DatabaseBusy(f"{self.path} stayed locked by another writer; try again shortly")

    def _write_once(self, command: Callable[[apsw.Connection], T]) -> T:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self._check_schema_cookie()
            result = command(self.conn)
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.txn_state() != apsw.SQLITE_TXN_NONE:
                self.conn.execute("ROLLBACK")
            raise
        return result

    def _check_schema_cookie(self) -> None:
        """Cheap per-transaction schema check: the cookie moves on any DDL change."""
        if int(self.conn.execute("PRAGMA schema_version").get) != self._schema_cookie:
            self._verify_objects()
            self._schema_cookie = int(self.conn.execute("PRAGMA schema_version").get)

    def read(self, query: Callable[[apsw.Connection], T]) -> T:
        """Run `query` against one consistent snapshot (a read transaction)."""
        with self.snapshot() as conn:
            return query(conn)

    @contextmanager
    def snapshot(self) -> Iterator[apsw.Connection]:
        """Context-manager form of `read`."""
        try:
            self.conn.execute("BEGIN DEFERRED")
            try:
                yield self.conn
            finally:
                self.conn.execute("COMMIT")
        except apsw.Error as exc:
            translated = self._translate(exc)
            if translated is None:
                raise
            raise translated from exc

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self.conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
