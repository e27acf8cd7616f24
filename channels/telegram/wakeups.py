"""Reaching a person quickly while `poll --for` runs (ARCHITECTURE section 11).

A getUpdates long poll waits up to 20 s. A decision asked meanwhile must not wait for it to
end. So during a window a watcher task of the same pass (no daemon, no coordinator, nothing
that outlives the cron run) reads `PRAGMA data_version` on a read connection of its own every
WATCH_SECONDS: the counter moves when another connection commits; reading it takes no lock
and writes nothing. When it moves, the pass reserves deliveries for decisions new to the
channel (a read first: nothing is written when there is nothing new) and starts its background
delivery, paced like every other send. Every send still goes through `Outbound.apply`: the
effect's own lease, the intent committed before the request, no transaction across a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from channels import store
from state import leases
from state.database import Database

__all__ = ["WATCH_SECONDS", "stop", "until_free", "watch"]


WATCH_SECONDS = 0.15  # how often the watcher reads data_version during a window
_HANDOVER_WATCH_SECONDS = 0.05  # how often a pass waiting for the lease reads data_version


async def watch(db: Database, changed: Callable[[], None]) -> None:
    """Call `changed` once at the start, then after each look that finds another
    connection's commit (until cancelled)."""
    with Database.open_reader(db.path, clock=db.clock) as reader:
        seen = _version(reader)
        # A commit made after the pass last looked but before this baseline moved nothing
        # that this watcher sees: look once now (a read; nothing written if nothing is new).
        changed()
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            version = _version(reader)
            if version != seen:
                seen = version
                changed()


async def stop(task: asyncio.Future[None] | None) -> None:
    """End the watcher (its error, if it failed, is raised here)."""
    if task is None:
        return
    if task.done():
        task.result()
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def until_free(db: Database, channel_id: str, owner_gone: Callable[[str], bool],
                     give_up: Callable[[], bool]) -> None:
    """Return once the channel's lease looks free (released, expired, or its owner's process
    gone), or `give_up()` says so. Looks at the lease row only after another connection
    committed (data_version moved; a release is a commit) and once a second otherwise (an
    expiry or a killed owner commits nothing): reads only, no lock, nothing written."""
    with Database.open_reader(db.path, clock=db.clock) as reader:
        seen, looked = _version(reader), time.monotonic()
        while not give_up():
            await asyncio.sleep(_HANDOVER_WATCH_SECONDS)
            version = _version(reader)
            if version == seen and time.monotonic() - looked < 1.0:
                continue
            seen, looked = version, time.monotonic()
            if _lease_free(reader, channel_id, owner_gone):
                return


def _lease_free(reader: Database, channel_id: str, owner_gone: Callable[[str], bool]) -> bool:
    held = reader.read(lambda c: leases.read(c, store.channel_resource(channel_id)))
    now = reader.clock.now_ms()
    return held is None or not held.is_live(now) or not held.owner_id or \
        owner_gone(held.owner_id)


def _version(reader: Database) -> int:
    return int(reader.conn.execute("PRAGMA data_version").get)
