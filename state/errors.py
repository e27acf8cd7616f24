"""Errors of the state layer.

    StateError                      root; every class has a stable `code` and an `exit_code`
    ├── DatabaseMissing             read path found no database (exit 65 for verify)
    ├── IncompatibleDatabase        wrong identity, foreign or corrupt file, old storage (65)
    │   ├── DatabaseCorrupt         SQLite found a malformed page; the command stops (65)
    │   └── DatabaseReplaced        the file was deleted or replaced while open (65)
    ├── PermissionProblem           directory or file modes, unwritable location (77)
    ├── DatabaseBusy                another writer held the lock past every retry (75)
    ├── DiskFull                    the file system holding the database is full (75)
    ├── DiskIOError                 the disk failed a read or write (74)
    └── WriteRejected               a command's checks failed; nothing was written
        ├── LeaseHeld               a live owner holds the lease (75)
        ├── StaleLease              token, generation or expiry no longer valid
        └── Contradiction           the written data contradicts what is stored
            ├── StaleRevision       the expected resource revision is not current
            ├── BlobMismatch        same hash, different bytes/length/media type
            └── EffectConflict      same effect key, different payload

apsw errors are translated into these at the state boundary (`raise ... from exc`).
"""

from __future__ import annotations

from typing import ClassVar

from state.exit_codes import ExitCode

__all__ = [
    "CORRUPT_INSTRUCTION", "RESET_INSTRUCTION", "BlobMismatch", "Contradiction", "DatabaseBusy",
    "DatabaseCorrupt", "DatabaseMissing", "DatabaseReplaced", "DiskFull", "DiskIOError",
    "EffectConflict", "IncompatibleDatabase", "LeaseHeld", "PermissionProblem", "StaleLease",
    "StaleRevision", "StateError", "WriteRejected",
]


RESET_INSTRUCTION = (
    "Pi Workflows durable state is incompatible. Move or remove the old workflow state, "
    "then create a new state.sqlite database."
)
# A damaged file is ours: its decisions are worth restoring, not starting over.
CORRUPT_INSTRUCTION = (
    "Restore your latest backup over it (a copy `piw-channels backup` made; move the damaged"
    " file and its -wal and -shm away first), or with no backup, move them away and run"
    " `piw-channels init` to create a new database."
)


class StateError(Exception):
    """Root of every state-layer error."""

    code: ClassVar[str] = "state_error"
    exit_code: ClassVar[int] = ExitCode.INTERNAL


class DatabaseMissing(StateError):
    """The database does not exist and this path must not create it."""

    code = "database_missing"
    exit_code = ExitCode.INCOMPATIBLE


class IncompatibleDatabase(StateError):
    """The file is not this schema (or not a database); it was not modified."""

    code = "database_incompatible"
    exit_code = ExitCode.INCOMPATIBLE


class DatabaseReplaced(IncompatibleDatabase):
    """The file at the database's path is no longer the one opened (deleted or replaced)."""

    code = "database_replaced"
    exit_code = ExitCode.INCOMPATIBLE


class DatabaseCorrupt(IncompatibleDatabase):
    """SQLite found a malformed page: the command stops at once, and writes nothing more."""

    code = "database_corrupt"


class DiskFull(StateError):
    """The file system holding the database has no room; the transaction rolled back."""

    code = "disk_full"
    exit_code = ExitCode.TEMPORARY


class DiskIOError(StateError):
    """The disk failed a read or write (not for want of room); the transaction rolled back."""

    code = "disk_io_error"
    exit_code = ExitCode.IO_ERROR


class PermissionProblem(StateError):
    """A directory or file has unsafe modes, or the location cannot be written."""

    code = "permission_problem"
    exit_code = ExitCode.PERMISSION


class DatabaseBusy(StateError):
    """Another writer kept the database locked beyond the busy timeout and retries."""

    code = "database_busy"
    exit_code = ExitCode.TEMPORARY


class WriteRejected(StateError):
    """A write command's checks failed; the whole command rolled back."""

    code = "write_rejected"
    exit_code = ExitCode.INTERNAL


class Contradiction(WriteRejected):
    """What a write says contradicts what is stored: the data's own fault (one inbox row's,
    say), not the lease's or the database's."""

    code = "contradiction"


class StaleRevision(Contradiction):
    """The expected revision of a resource is not its current revision."""

    code = "stale_revision"


class LeaseHeld(WriteRejected):
    """Another live owner holds the lease."""

    code = "lease_held"
    exit_code = ExitCode.TEMPORARY


class StaleLease(WriteRejected):
    """The lease evidence (owner, token, generation, expiry) is no longer valid."""

    code = "stale_lease"
    exit_code = ExitCode.TEMPORARY


class BlobMismatch(Contradiction):
    """A blob with this hash exists with different bytes, length or media type."""

    code = "blob_mismatch"


class EffectConflict(Contradiction):
    """An effect with the same key exists with a different payload."""

    code = "effect_conflict"
