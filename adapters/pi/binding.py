"""Is this bridge the one a Pi extension spawned? The secret on an inherited pipe.

The extension starts the bridge with an extra pipe (`--secret-fd N`; Node makes it a Unix
socket pair) and writes a random secret on it; the same secret comes back in `hello`. The
bridge believes it only when the descriptor is a socket pair made by its own parent process
(SO_PEERCRED): a program the agent runs through Pi's bash tool gets no such descriptor from Pi
(even its stdin is not a pipe from Pi), and one it makes itself names the program, not Pi.
This is a guard rail, not a boundary: another process of the same user could still spawn a
bridge the same way.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import select
import socket
import stat
import struct
from dataclasses import dataclass

__all__ = ["Binding", "read_binding"]


_SECRET_RE = re.compile(r"[0-9a-f]{64}")
_READ_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Binding:
    """What the bridge learned about its parent: the secret, or why there is none."""

    secret: str | None
    problem: str | None = None

    def accepts(self, offered: object) -> bool:
        """The hello's secret is the one on the pipe (compared in constant time)."""
        return (self.secret is not None and isinstance(offered, str)
                and hmac.compare_digest(self.secret.encode(), offered.encode()))


def _peer_pid(fd: int) -> int | None:
    """The pid that made the other end of a Unix socket pair (SO_PEERCRED), or None."""
    sock = socket.socket(fileno=os.dup(fd))
    try:
        if sock.family != socket.AF_UNIX:
            return None
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    finally:
        sock.close()
    pid, _uid, _gid = struct.unpack("3i", raw)
    return int(pid)


def _read_line(fd: int) -> bytes:
    data = b""
    while b"\n" not in data and len(data) < 200:
        ready, _, _ = select.select([fd], [], [], _READ_SECONDS)
        if not ready:
            break
        chunk = os.read(fd, 200)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0]


def read_binding(fd: int | None) -> Binding:
    """Read the secret from `fd` and check where it came from; never raises."""
    if fd is None:
        return Binding(None, "started without --secret-fd (only the Pi extension starts it)")
    if fd <= 2:
        return Binding(None, "the secret descriptor cannot be stdin, stdout or stderr")
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            return Binding(None, f"descriptor {fd} is not a socket pair from the extension")
        if _peer_pid(fd) != os.getppid():
            return Binding(None, f"descriptor {fd} does not come from the parent process")
        secret = _read_line(fd).decode("ascii", "replace")
    except OSError as exc:
        return Binding(None, f"descriptor {fd} cannot be read: {exc.strerror}")
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    if _SECRET_RE.fullmatch(secret) is None:
        return Binding(None, f"descriptor {fd} did not carry a secret")
    return Binding(secret)
