"""The database's files: where they live, the private modes they must have, their creation,
and the translation of file-system and SQLite file failures into one-line errors.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import apsw

from state.errors import (
    CORRUPT_INSTRUCTION,
    RESET_INSTRUCTION,
    DatabaseBusy,
    DatabaseCorrupt,
    DatabaseMissing,
    DiskFull,
    DiskIOError,
    IncompatibleDatabase,
    PermissionProblem,
    StateError,
)

__all__ = [
    "STATE_RELATIVE_PATH", "check_modes", "corrupt", "create_file", "default_path",
    "disk_full", "incompatible", "lost", "make_private_dir", "open_failure", "translate",
    "write_marker",
]


STATE_RELATIVE_PATH = Path(".pi/agent/workflows/state.sqlite")


def default_path(home: Path | None = None) -> Path:
    """The one production location: ~/.pi/agent/workflows/state.sqlite (under `home` when
    given, the user's home by default)."""
    return (Path.home() if home is None else home) / STATE_RELATIVE_PATH


def _legacy_paths(db_path: Path) -> list[Path]:
    """Old storage locations that must not be read, imported or deleted."""
    workflows = db_path.parent
    return [
        workflows / "runs",
        workflows / "decisions",
        workflows / "controllers",
        Path.home() / ".config" / "pi-workflows" / "telegram-state.sqlite",
    ]


def incompatible(path: Path, detail: str) -> IncompatibleDatabase:
    """The one-line refusal of a database that is not ours, with the reset instruction."""
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


def disk_full(path: Path) -> DiskFull | None:
    """The full-disk error for the database at `path` when its file system has no room left
    (what every write would fail with), else None."""
    free = _free_bytes(path.parent)
    return _disk_full(path) if free is not None and free < _MIN_FREE_BYTES else None


_MIN_FREE_BYTES = 4096  # less than one page: the next write fails


def corrupt(path: Path, exc: BaseException | str) -> DatabaseCorrupt:
    """The one-line error for a malformed database file (with the reset instruction)."""
    return DatabaseCorrupt(
        f"{path}: the database file is malformed (SQLite: {exc}); nothing more was written"
        f" to it. {CORRUPT_INSTRUCTION}"
    )


def translate(path: Path, exc: BaseException) -> StateError | None:
    """The state error for an apsw failure that is about the file, not the command: a
    malformed database (65), a full disk (75) or a failing disk (74). None for anything
    else."""
    if isinstance(exc, apsw.CorruptError | apsw.NotADBError):
        return corrupt(path, exc)
    if isinstance(exc, apsw.FullError):
        return _disk_full(path)
    if isinstance(exc, apsw.BusyError):  # a reader or writer in exclusive locking mode
        return DatabaseBusy(
            f"{path} stayed locked by another process (for more than the busy timeout; one"
            " in exclusive locking mode keeps it until it closes); try again shortly")
    if isinstance(exc, apsw.IOError) and _free_bytes(path.parent) == 0:
        return _disk_full(path)  # a -wal or -shm that could not grow: "disk I/O error"
    if isinstance(exc, apsw.ProtocolError):  # the -shm cannot be mapped or locked
        return DiskIOError(
            f"SQLite could not lock or map the files of {path} (SQLite: {exc}); the file"
            " system holding it is failing, or lacks the locks a WAL database needs (a"
            " network file system?): check the disk and its file system (dmesg), then run"
            " the command again")
    if isinstance(exc, apsw.IOError):
        return DiskIOError(
            f"the disk failed a read or write of {path} (SQLite: {exc}); the change in"
            " progress was not committed and earlier ones are kept: check the disk and its"
            " file system (dmesg), then run the command again")
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


def open_failure(db_path: Path, exc: Exception) -> PermissionProblem:
    """SQLite could not open the database or its -wal/-shm files for what it needs."""
    if _read_only_fs(db_path.parent):
        return PermissionProblem(
            f"cannot open {db_path}: the file system is read-only (a WAL database needs to"
            " write its -wal and -shm files even to read)"
        )
    return PermissionProblem(f"cannot open {db_path}: {exc}; check that you own the"
                             " directory and its files")


def make_private_dir(path: Path) -> None:
    """Create `path` and every missing ancestor 0700 whatever the umask (`mkdir(parents=True)`
    would leave the ancestors, ~/.pi and ~/.pi/agent, at 0777 under `umask 000`). A directory
    that exists is left as it is."""
    missing: list[Path] = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            continue  # another process made it first
        directory.chmod(0o700)  # mkdir honours the umask; the mode must be exact
    if not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))


def _marker_path(db_path: Path) -> Path:
    """The note beside a database that says it existed (`state.sqlite` -> `piw-channels-state.txt`);
    a name of its own, so that `rm state.sqlite*` leaves it."""
    return db_path.with_name(f"piw-channels-{db_path.stem}.txt")


_MARKER_TEXT = """\
piw-channels has used the database {db}.
While this note exists, a command that finds the database missing refuses to create an empty
one in its place (the decisions and the presses would be lost without a word): restore the
file from a backup, or start an empty database with: piw-channels init
"""


def lost(db_path: Path) -> DatabaseMissing | None:
    """Why a missing database must not be created now: the note says it existed."""
    if db_path.exists() or not _marker_path(db_path).exists():
        return None
    return DatabaseMissing(
        f"{db_path} is missing, but a database existed there ({_marker_path(db_path).name}"
        " says so): it was deleted or moved, and an empty new one would lose the decisions"
        f" and the presses; restore it (cp BACKUP {db_path}), or start an empty one:"
        " piw-channels init")


def write_marker(db_path: Path) -> None:
    """Leave the note once (0600); best effort: a database that opened is usable without it."""
    marker = _marker_path(db_path)
    if marker.exists():
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError:
        return  # another process wrote it first, or the directory refuses: nothing is lost
    with os.fdopen(fd, "w") as out:
        out.write(_MARKER_TEXT.format(db=db_path))


def create_file(db_path: Path) -> None:
    """Create the directory (0700) and an empty database file (0600) before SQLite opens it."""
    parent = db_path.parent
    try:
        make_private_dir(parent)
        _check_private(parent, directory=True)
        if legacy := [p for p in _legacy_paths(db_path) if p.exists()]:
            names = ", ".join(str(p) for p in legacy)
            raise incompatible(db_path, f"old workflow storage exists ({names})")
        fd = os.open(db_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
    except FileExistsError:
        return  # another process created it first; it initializes under an exclusive lock
    except OSError as exc:
        raise _os_error(db_path, exc) from exc
