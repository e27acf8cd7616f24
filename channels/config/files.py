"""Private files: regular files only, no group or other permission bits, read without following
surprises; written atomically with mode 0600. Tokens are read here and never copied.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from channels.config.errors import (
    ConfigError,
    ConfigInvalid,
    ConfigPermission,
    ConfigUnavailable,
)
from state.files import make_private_dir

__all__ = [
    "BOT_TOKEN_FORMAT", "SETTLED_NS", "SETUP_LABEL", "FileRef", "bot_id", "check_directory",
    "file_identity", "prepare_directory", "read_private_file", "read_token_file",
    "write_private_json",
]


SETUP_LABEL: Final = "Telegram setup"
# A bot token is "<bot id>:<secret>" (35 URL-safe characters today). Anything else could change
# a request URL, so it is refused where the file is read (and again by the client).
BOT_TOKEN_FORMAT: Final = re.compile(r"[0-9]+:[A-Za-z0-9_-]+")
_PRIVATE_FILE_MODE: Final = 0o600

_PRIVATE_DIR_MODE: Final = 0o700


def check_directory(directory: Path) -> None:
    try:
        info = directory.stat()
    except OSError as exc:
        raise _os_error(FileRef(directory, str(directory)), exc) from None
    _require_owner(FileRef(directory, f"the directory {directory}"), info.st_uid)
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        fix = f"chmod 700 {shlex.quote(str(directory))}"
        raise ConfigPermission(
            f"{directory} is writable by group or others (mode {mode:04o}); fix: {fix}",
            path=directory,
            hint=fix,
        )


@dataclass(frozen=True, slots=True)
class FileRef:
    """A file to read, with the words that introduce it in messages."""

    path: Path
    context: str
    field: str | None = None


def read_private_file(ref: FileRef, *, private: bool = True) -> bytes:
    """The file's bytes, checked through the descriptor that reads them (no check/use race).

    FileNotFoundError passes through: each caller decides what a missing file means.
    """
    try:
        # O_NONBLOCK: a FIFO planted in place of a file must not hang the poller.
        fd = os.open(ref.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _os_error(ref, exc) from None
    try:
        info = os.fstat(fd)
        _require_regular(ref, info.st_mode, private=private)
        if private:
            _require_owner(ref, info.st_uid)
        return _read_all(fd)
    except OSError as exc:
        raise _os_error(ref, exc) from None
    finally:
        os.close(fd)


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _require_regular(ref: FileRef, st_mode: int, *, private: bool) -> None:
    if not stat.S_ISREG(st_mode):
        raise ConfigInvalid(
            f"{ref.context} must be a regular file (it is {_file_kind(st_mode)})",
            path=ref.path,
            field=ref.field,
        )
    mode = stat.S_IMODE(st_mode)
    if private and mode & 0o077:
        fix = f"chmod 600 {shlex.quote(str(ref.path))}"
        raise ConfigPermission(
            f"{ref.context} permissions must be 0600 or stricter (mode is {mode:04o}); fix: {fix}",
            path=ref.path,
            field=ref.field,
            hint=fix,
        )


def _require_owner(ref: FileRef, uid: int) -> None:
    """A private file (or its directory) must belong to the user running the command, as the
    database must: another user could point apiBaseUrl at their own server, or swap the token
    file, and receive this user's bot token."""
    mine = os.geteuid()
    if uid != mine:
        fix = f"chown {mine} {shlex.quote(str(ref.path))}"
        raise ConfigPermission(
            f"{ref.context} belongs to another user (uid {uid}), not to the user running"
            f" piw-channels (uid {mine}); fix: {fix} (after checking its content)",
            path=ref.path, field=ref.field, hint=fix)


def _file_kind(st_mode: int) -> str:
    if stat.S_ISDIR(st_mode):
        return "a directory"
    if stat.S_ISFIFO(st_mode):
        return "a FIFO"
    if stat.S_ISSOCK(st_mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(st_mode) or stat.S_ISBLK(st_mode) else "not a file"


def _os_error(ref: FileRef, exc: OSError) -> ConfigError:
    reason = exc.strerror or type(exc).__name__
    if isinstance(exc, PermissionError):
        return ConfigPermission(
            f"{ref.context} cannot be accessed ({reason}); it must belong to, and be "
            "readable by, the user that runs piw-channels",
            path=ref.path,
            field=ref.field,
        )
    return ConfigUnavailable(f"{ref.context} cannot be used ({reason})", path=ref.path)


def bot_id(token: str) -> str:
    """The bot's numeric id: the digits before the token's colon (not secret: getMe returns
    it), which tells whether two token files are the same bot."""
    return token.partition(":")[0]


class _NamedTokenFile(Protocol):
    """A credential as far as reading its token goes (`model.TelegramCredential`)."""

    @property
    def name(self) -> str: ...
    @property
    def token_file(self) -> Path: ...


def read_token_file(credential: _NamedTokenFile, *, prefix: str, field: str | None) -> str:
    """The trimmed token; every error names the file, never its content."""
    path = credential.token_file
    context = f"{prefix}Telegram credential {credential.name} token file {path}"
    ref = FileRef(path, context, field)
    if not path.is_absolute():
        raise ConfigInvalid(f"{context} must be an absolute path", path=path, field=field)
    try:
        data = read_private_file(ref)
    except FileNotFoundError:
        raise ConfigInvalid(f"{context} does not exist", path=path, field=field) from None
    try:
        parent = path.parent.stat()
    except OSError as exc:
        raise _os_error(ref, exc) from None
    _require_owner(FileRef(path.parent, f"{context}: its directory {path.parent}", field),
                   parent.st_uid)
    try:
        # `from None` below: a UnicodeDecodeError keeps the whole input, i.e. the token.
        token = data.decode("utf-8-sig").strip()
    except UnicodeDecodeError:
        raise ConfigInvalid(f"{context} is not UTF-8 text", path=path, field=field) from None
    if not token:
        raise ConfigInvalid(
            f"{prefix}Telegram credential {credential.name} token file is empty ({path})",
            path=path,
            field=field,
        )
    if not BOT_TOKEN_FORMAT.fullmatch(token):
        # The message describes the expected shape and never quotes the content.
        raise ConfigInvalid(
            f"{context} does not hold a bot token (expected <bot id>:<secret> as @BotFather"
            " gives it: digits, a colon, then letters, digits, '_' or '-')",
            path=path, field=field,
        )
    return token


def prepare_directory(root: Path) -> None:
    try:
        make_private_dir(root)  # every missing ancestor 0700 too, whatever the umask
        os.chmod(root, _PRIVATE_DIR_MODE)  # kept 0700 even when it already existed
    except OSError as exc:
        ref = FileRef(root, f"{SETUP_LABEL}: configuration directory {root}")
        raise _os_error(ref, exc) from None


def write_private_json(path: Path, document: Mapping[str, object]) -> None:
    """Write 2-space JSON + LF via `<f>.<pid>.<random>.tmp` (0600), fsync and rename."""
    data = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(16)}.tmp")
    try:
        _write_new_file(temporary, data)
        os.replace(temporary, path)
        os.chmod(path, _PRIVATE_FILE_MODE)
        _fsync_directory(path.parent)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise _os_error(FileRef(path, f"{SETUP_LABEL}: {path}"), exc) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _write_new_file(path: Path, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(path, flags, _PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, _PRIVATE_FILE_MODE)  # the umask may have removed owner bits
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable, not only the file's content.
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# A file changed this recently may change again within its file system's timestamp granularity
# (a second or two on some) without its identity changing: not cached until it is older.
SETTLED_NS: Final = 2_000_000_000


def file_identity(path: Path) -> tuple[int, ...] | None:
    """What changes whenever a file or its directory does (a write, a rename over it, a chmod,
    a chown, an entry added or removed): inode, size, times, mode and owner of the file (not
    followed) and of its directory. None when either is missing or changed in the last two
    seconds. A cache keyed by it rereads whenever a reread could give another answer (the
    private-mode checks included)."""
    try:
        found, directory = os.lstat(path), os.stat(path.parent)
    except OSError:
        return None
    newest = max(found.st_mtime_ns, found.st_ctime_ns, directory.st_mtime_ns,
                 directory.st_ctime_ns)
    if time.time_ns() - newest < SETTLED_NS:
        return None
    return tuple(int(v) for st in (found, directory) for v in (
        st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode,
        st.st_uid))
