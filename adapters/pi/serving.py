"""The `pi bridge` process: read the extension's lines from stdin with `select`, tick the
bridge between them, and exit cleanly, releasing the session's lease, when stdin closes (or
on SIGTERM)."""

from __future__ import annotations

import os
import select
import signal
from types import FrameType

from adapters.pi.binding import Binding, read_binding
from adapters.pi.bridge import Bridge, ConfigLoader
from adapters.pi.framing import MAX_LINE_BYTES, LineWriter
from channels.config import loading
from channels.decisions import workflows
from state.database import Database

__all__ = ["serve"]


# A tick reads PRAGMA data_version (no lock, no write): often enough that an answer made
# elsewhere reaches the session well within a second.
_TICK_SECONDS = 0.2


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _serve(bridge: Bridge, stdin_fd: int, *, tick_seconds: float = _TICK_SECONDS) -> None:
    """Read lines until stdin closes (or the extension stops reading), ticking in between."""
    buffer = b""
    discarding = False
    while not bridge.out.closed:
        readable, _, _ = select.select([stdin_fd], [], [], tick_seconds)
        if readable:
            chunk = os.read(stdin_fd, 65536)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if discarding:
                    discarding = False  # the end of an over-long line
                else:
                    bridge.handle_line(line)
            if len(buffer) > MAX_LINE_BYTES:
                bridge.error("line_too_long", f"lines are limited to {MAX_LINE_BYTES} bytes")
                buffer, discarding = b"", True
        bridge.tick()
    if buffer.strip() and not discarding:
        bridge.error("truncated", "stdin closed in the middle of a line; it was ignored")


def _run(db: Database, owner_id: str, binding: Binding, *, stdin_fd: int = 0,
        stdout_fd: int = 1, tick_seconds: float = _TICK_SECONDS,
        load_config: ConfigLoader | None = None) -> int:
    """The `pi bridge` process: serve until stdin closes, then release the lease."""
    previous = signal.signal(signal.SIGTERM, _stop)
    bridge = Bridge(db, LineWriter(stdout_fd), owner_id,
                    load_config=load_config or loading.load_config, binding=binding)
    try:
        _serve(bridge, stdin_fd, tick_seconds=tick_seconds)
    except KeyboardInterrupt:
        pass
    finally:
        bridge.close()
        signal.signal(signal.SIGTERM, previous)
    return 0


def serve(secret_fd: int | None, *, tick_seconds: float | None = None) -> int:
    """`piw-channels pi bridge`: read the extension's secret (from the inherited pipe
    `secret_fd`), then serve the session until stdin closes, looking for work every
    `tick_seconds` (the bridge's own tick when None)."""
    # The secret pipe is read first, while the extension that made it is surely still there.
    found = read_binding(secret_fd)
    with Database.open_writer() as db:
        # Bound to the Pi (the extension) that spawned it: that window keeps the session while
        # it lives. Only a parent that says it is Pi is taken as one (other parents: as before).
        pi_parent = os.environ.get("PIW_PI_WINDOW") == str(os.getppid())
        window = os.getppid() if found.secret is not None and pi_parent else None
        return _run(db, workflows.new_owner_id(db, "pi-bridge", window), found,
                    tick_seconds=_TICK_SECONDS if tick_seconds is None else tick_seconds)
