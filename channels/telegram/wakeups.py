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
from collections.abc import Callable

from state.database import Database

WATCH_SECONDS = 0.15  # how often the watcher reads data_version during a window


async def watch(db: Database, changed: Callable[[], None]) -> None:
    """Call `changed` after each look that finds another connection's commit (until
    cancelled)."""
    with Database.open_reader(db.path, clock=db.clock) as reader:
        seen = _version(reader)
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


def _version(reader: Database) -> int:
    return int(reader.conn.execute("PRAGMA data_version").get)


__all__ = ["WATCH_SECONDS", "stop", "watch"]
