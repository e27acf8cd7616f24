"""Reaching a person quickly while `poll --for` runs (ARCHITECTURE section 11).

A getUpdates long poll waits up to 20 s. A decision asked meanwhile must not wait for it to
end, and a backlog of deliveries must not keep presses waiting behind it. So during a window
a channel's outbound work runs beside its receive loop, as a second task of the same pass
(no daemon, no coordinator, nothing that outlives the cron run):

- it watches `PRAGMA data_version` on a read connection of its own every WATCH_SECONDS (the
  counter moves when any connection commits, this pass's own included; reading it takes no
  lock and writes nothing), and the receive loop nudges it after each batch;
- woken, it reserves deliveries for new open decisions (a read first: nothing is written when
  there is nothing new) and applies due effects: first what presses caused (settlements, a few
  at once, then prompts and notices), then one delivery, then it looks again, so a press that
  arrives while a backlog drains waits for one send at most, not for the backlog;
- between rounds it sleeps until the next change, nudge, or retry time of a pending effect.

Every send still goes through `Outbound.apply`: the effect's own lease, its intent committed
before the request leaves, no transaction held across a request. An effect the receive loop is
applying at the same moment is no longer pending, so `begin_attempt` refuses a second taker.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from channels.telegram.deliveries import DELIVER, SETTLE
from channels.telegram.outbound import EFFECT_TYPES, Outbound
from state import effects
from state.database import Database

WATCH_SECONDS = 0.15  # how often the watcher reads data_version during a window
# What a press or reply causes besides its settlement (a prompt, a notice): it follows the
# callback answer that announces it, and goes ahead of any further delivery.
REPLIES = tuple(t for t in EFFECT_TYPES if t not in (DELIVER, SETTLE))


@dataclass
class Drain:
    """The outbound side of one channel's `poll --for` window."""

    db: Database
    outbound: Outbound
    channel_id: str
    reserve: Callable[[], None]  # reserve deliveries for new open decisions (reads first)
    wall_clock: Callable[[], float] = time.time
    settle_concurrency: int = 1
    # Set by the receive loop while a batch's callback answers are in flight (REPLIES wait).
    hold_prompts: bool = False
    applied: int = 0  # effects attempted, for the pass report
    _watch: Database | None = None
    _seen: int = -1
    _nudged: asyncio.Event = field(default_factory=asyncio.Event)
    _stopping: bool = False
    _end: Callable[[], float] = lambda: float("inf")

    def nudge(self) -> None:
        """The receive loop committed something, and its callback answers are out."""
        self.hold_prompts = False
        self._nudged.set()

    def stop(self) -> None:
        """Finish the effect in hand, then end."""
        self._stopping = True
        self._nudged.set()

    async def run(self, end: Callable[[], float]) -> None:
        """Drain, then wait for work, until the window ends or `stop()`."""
        self._watch = Database.open_reader(self.db.path, clock=self.db.clock)
        self._end = end
        try:
            self._changed()
            while not self._stopping:
                refused = await self.drain()
                # A refused token sends nothing until a getUpdates works again: wait for the
                # receive loop's next batch rather than for the next commit.
                if not await self._wait(end(), nudge_only=refused):
                    return
        finally:
            self._watch.close()

    async def drain(self) -> bool:
        """Reserve what is new, then apply due effects until none is left; True when the
        Bot API refused the token (the rest stay due)."""
        self.reserve()
        tried: set[str] = set()  # a delivery another taker holds is not tried again this round
        while not self._stopping:
            # apply_due forgets an earlier refusal: the token may work again.
            self.applied += await self.outbound.apply_due((SETTLE,), self.settle_concurrency)
            if not self.outbound.unauthorized and not self.hold_prompts:
                self.applied += await self.outbound.apply_due(REPLIES)
            if self.outbound.unauthorized:
                return True
            due = [e for e in self.db.read(self._due) if e.effect_id not in tried]
            if not due or self._stopping or self.wall_clock() >= self._end():
                return False  # what is left waits for the next pass: cron starts it soon
            tried.add(due[0].effect_id)
            await self.outbound.apply(due[0])
            self.applied += 1
            if self.outbound.unauthorized:
                return True
            if self._changed():
                self.reserve()  # a decision asked while that delivery was being sent
        return False

    def _due(self, conn: Any) -> list[effects.Effect]:
        return effects.list_due(conn, (DELIVER,), self.db.clock.now_ms(), scope=self.channel_id)

    async def _wait(self, end: float, *, nudge_only: bool = False) -> bool:
        """Sleep until there may be work; False once the window ended or `stop()`."""
        due = self.db.read(lambda c: effects.next_due_at(c, EFFECT_TYPES,
                                                         scope=self.channel_id))
        # Due already: it was just tried (another taker has it); wait for a change instead.
        retry_at = due if due is not None and due > self.db.clock.now_ms() else None
        while not self._stopping:
            remaining = end - self.wall_clock()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._nudged.wait(), min(WATCH_SECONDS, remaining))
            if self._nudged.is_set():
                self._nudged.clear()
                return not self._stopping
            if nudge_only:
                continue
            if self._changed() or (retry_at is not None and self.db.clock.now_ms() >= retry_at):
                return True
        return False

    def _changed(self) -> bool:
        """Whether any connection committed since the last look (no lock, no write)."""
        assert self._watch is not None
        version = int(self._watch.conn.execute("PRAGMA data_version").get)
        changed, self._seen = version != self._seen, version
        return changed


async def finish(drain: Drain, task: asyncio.Future[None] | None, *, cancel: bool = False,
                 at_end: bool = False) -> None:
    """End the drain of a window: at the window's end (`at_end`), or after the effect in
    hand (a send cut short would leave an ambiguous intent), or at once when the pass itself
    is being cancelled."""
    if task is None:
        return
    if not at_end:
        drain.stop()
    if cancel:
        task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        if not cancel:
            raise
