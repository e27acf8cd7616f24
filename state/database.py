"""Opening state.sqlite: secure creation, connection settings, schema identity, transactions.

A writer connection creates the database on first use (directory 0700, file 0600, created
before SQLite touches it); a reader never creates anything and runs with `query_only`. Both
refuse a database whose identity differs from the compiled DDL, without modifying it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import apsw

from state import blobs
from state.clock import Clock, Entropy, SystemClock, SystemEntropy
from state.ddl import DDL
from state.errors import (
    DatabaseBusy,
    DatabaseCorrupt,
    DatabaseMissing,
    DatabaseReplaced,
    PermissionProblem,
    StateError,
)
from state.files import (
    check_modes,
    create_file,
    default_path,
    incompatible,
    lost,
    open_failure,
    translate,
    write_marker,
)
from state.schema import (
    APPLICATION_ID,
    DDL_DIGEST,
    SCHEMA_NAME,
    SCHEMA_VERSION,
    expected_objects,
)
from state.version import VERSION

__all__ = ["COMMON_PRAGMAS", "Database", "SystemClock", "default_path", "savepoint"]


_T = TypeVar("_T")

_BUSY_TIMEOUT_MS = 5000

COMMON_PRAGMAS = (
    ("foreign_keys", "ON"),
    ("journal_mode", "WAL"),
    ("synchronous", "FULL"),
    ("wal_autocheckpoint", "1000"),
    ("journal_size_limit", "67108864"),
)


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
        blobs.forget(conn)  # what the unit stored is gone
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
    _identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file at open

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open_writer(
        cls,
        path: Path | None = None,
        *,
        clock: Clock | None = None,
        entropy: Entropy | None = None,
        recreate: bool = False,
    ) -> Database:
        """Open for writing, creating the database exactly as `init` does when it is missing,
        unless the note beside it says one existed (`recreate`, for `init`, creates it then
        too): a deleted database is not replaced silently by an empty one."""
        db_path = path or default_path()
        if not db_path.exists():
            if not recreate and (problem := lost(db_path)) is not None:
                raise problem
            create_file(db_path)
        check_modes(db_path)
        db = cls._connect(db_path, readonly=False, clock=clock, entropy=entropy)
        db = db._prepare(db._initialize_if_empty, db._verify_identity, db._apply_pragmas)
        write_marker(db_path)
        return db

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
        return db._prepare(db._verify_created, db._verify_identity, db._apply_pragmas)

    def _prepare(self, *steps: Callable[[], None]) -> Database:
        """Run the opening steps; on any failure close the connection (nothing written)."""
        try:
            for step in steps:
                step()
        except (apsw.CantOpenError, apsw.ReadOnlyError) as exc:
            self.close()
            raise open_failure(self.path, exc) from exc
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
        conn.set_busy_timeout(_BUSY_TIMEOUT_MS)
        try:
            info = os.stat(db_path)
            identity: tuple[int, int] | None = (info.st_dev, info.st_ino)
        except OSError:
            identity = None
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
            _identity=identity,
        )

    def check_file(self) -> None:
        """Raise DatabaseReplaced when the file at the path is not the one this connection
        has open (deleted, or replaced by another file): what is written now would be lost
        with the old file, so a poller must not confirm updates to Telegram."""
        try:
            info = os.stat(self.path)
            now: tuple[int, int] | None = (info.st_dev, info.st_ino)
        except FileNotFoundError:
            now = None
        if self._identity is not None and now == self._identity:
            return
        what = "was deleted" if now is None else "was replaced by another file"
        raise DatabaseReplaced(
            f"{self.path} {what} while this command had it open; nothing more is written"
            " and no Telegram update was confirmed (Telegram sends them again): put the"
            " database back (or restore a backup), then run the command again")

    def _apply_pragmas(self) -> None:
        for name, value in COMMON_PRAGMAS:
            got = self.conn.execute(f"PRAGMA {name} = {value}").get
            if name == "journal_mode" and str(got).lower() != "wal":
                raise incompatible(self.path, f"journal mode is {got}, expected wal")

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
            raise incompatible(self.path, "the file is not a SQLite database") from exc

    def _has_objects(self) -> bool:
        return bool(self.conn.execute("SELECT count(*) FROM sqlite_schema").get)

    def _verify_created(self) -> None:
        """An empty file is a database another process is creating (a writer makes the file,
        then its schema): to a reader there is no state yet, not an incompatible file."""
        if self._read_header_int("user_version") == 0 and self._read_header_int(
                "application_id") == 0 and not self._has_objects():
            raise DatabaseMissing(f"the state database at {self.path} is being created (it is"
                                  " still empty); run the command again, or: piw-channels init")

    def _verify_identity(self) -> None:
        """Compare header, schema_meta and every live schema object with the compiled DDL."""
        app_id = self._read_header_int("application_id")
        if app_id != APPLICATION_ID:
            raise incompatible(
                self.path, f"application_id is {app_id:#x}, expected {APPLICATION_ID:#x}"
            )
        version = self._read_header_int("user_version")
        if version != SCHEMA_VERSION:
            raise incompatible(self.path, f"user_version {version} is not supported")
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
            raise incompatible(self.path, f"unexpected schema objects: {', '.join(extra)}")
        if missing := sorted(set(expected) - set(live)):
            raise incompatible(self.path, f"missing schema objects: {', '.join(missing)}")
        if changed := sorted(name for name in expected if live[name] != expected[name]):
            raise incompatible(self.path, f"changed schema objects: {', '.join(changed)}")

    def _verify_meta(self) -> None:
        rows = self.conn.execute(
            "SELECT id, schema_name, schema_version, schema_digest FROM schema_meta"
        ).fetchall()
        if rows != [(1, SCHEMA_NAME, SCHEMA_VERSION, DDL_DIGEST)]:
            raise incompatible(self.path, "the schema_meta row is missing or changed")

    # -- transactions --------------------------------------------------------------------------

    def write(self, command: Callable[[apsw.Connection], _T]) -> _T:
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

    def _write_once(self, command: Callable[[apsw.Connection], _T]) -> _T:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            with blobs.remembering(self.conn):
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

    def read(self, query: Callable[[apsw.Connection], _T]) -> _T:
        """Run `query` against one consistent snapshot (a read transaction)."""
        with self.snapshot() as conn:
            return query(conn)

    @contextmanager
    def snapshot(self) -> Iterator[apsw.Connection]:
        """Context-manager form of `read`."""
        try:
            self.conn.execute("BEGIN DEFERRED")
            try:
                with blobs.remembering(self.conn):
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
