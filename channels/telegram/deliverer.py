"""New deliveries (and reminders) and settlements go out in the background of a pass, so the
pass is back in getUpdates at once, and a decision asked just now goes out ahead of a backlog.

The poll cycle receives, processes and answers presses while a `Deliverer` applies the due
deliveries in a task of its own, at the pacer's NORMAL priority: a settlement or prompt that
a press causes takes the next slot of its chat ahead of them, and a press never waits for a
long queue of deliveries to drain. A decision the watcher (wakeups.py) sees asked during the
pass is `rush`ed: its delivery is applied at once in a task of its own at FRESH priority, so
it takes its chat's next slot ahead of the backlog (at most RUSH_MAX at a time: a burst of new
decisions is a backlog itself). Settlements (keyboards off, outcome posts) run in a task of
their own too, SETTLE_CONCURRENCY at once, at SETTLING priority: one that waits for its chat's
slot never keeps the pass from receiving the next press. None of them sends one effect twice:
each attempt claims the effect's own lease, and a second taker is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from channels.telegram.effect_kinds import BACKGROUND_TYPES
from channels.telegram.outbound import Outbound
from channels.telegram.pacing import FRESH, NORMAL, sending_as
from channels.telegram.reservations import DELIVER, SETTLE
from state import effects

__all__ = ["Deliverer"]


_RUSH_MAX = 4  # deliveries reserved together that still go ahead of the background queue
_SETTLE_CONCURRENCY = 4  # settlements in flight at once (independent decisions)


@dataclass
class Deliverer:
    """Applies the channel's due deliveries in one background task at a time, and the
    deliveries of decisions asked just now in tasks of their own."""

    outbound: Outbound
    applied: int = 0
    _task: asyncio.Task[int] | None = None
    _again: bool = False
    _rushed: set[asyncio.Task[bool]] = field(default_factory=set)
    _settling: asyncio.Task[int] | None = None
    _settle_again: bool = False

    def kick(self) -> None:
        """Deliver what is due now (and, if a run is under way, once more after it)."""
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._collect()
        self._task = asyncio.ensure_future(self._run())

    def settle(self) -> None:
        """Apply the due settlements (and, if a run is under way, once more after it)."""
        if self._settling is not None and not self._settling.done():
            self._settle_again = True
            return
        self._collect()
        self._settling = asyncio.ensure_future(self._settle())

    async def _settle(self) -> int:
        applied = 0
        while True:
            self._settle_again = False
            applied += await self.outbound.apply_due((SETTLE,), _SETTLE_CONCURRENCY)
            if not self._settle_again:
                return applied

    def rush(self, effect_ids: Sequence[str], *, newest: bool = False) -> None:
        """Deliveries just reserved for decisions asked now: each at once, ahead of the queue
        (more than RUSH_MAX together join the queue instead). `newest`, at a pass's start:
        also the newest due delivery (one rushed by the last run, which ended before it could
        go, or asked during the hand-over); the rest keep their order in the queue."""
        ids = list(effect_ids)
        if len(ids) > _RUSH_MAX:
            if not newest:  # the pass's first getUpdates goes before a backlog
                self.kick()
            ids = []
        if newest and not ids:
            channel_id = self.outbound.channel.channel_id
            due = self.outbound.db.read(lambda c: effects.list_due(
                c, (DELIVER,), self.outbound.db.clock.now_ms(), scope=channel_id))
            first = (effects.scoped_key(channel_id), channel_id)  # not a resend or a copy
            ids = [e.effect_id for e in due[::-1] if e.idempotency_key in first][:1]
        for effect_id in ids:
            task = asyncio.ensure_future(self._rush_one(effect_id))
            self._rushed.add(task)

    async def _rush_one(self, effect_id: str) -> bool:
        effect = self.outbound.db.read(lambda c: effects.get(c, effect_id))
        if effect.status is not effects.EffectStatus.PENDING or self.outbound.unauthorized \
                or self.outbound.blocked(effect):
            self.kick()  # it stays due: the queue tries it (or skips it, if taken)
            return False
        await self.outbound.apply(effect, FRESH)
        return True

    async def _run(self) -> int:
        applied = 0
        with sending_as(NORMAL):
            while True:
                self._again = False
                applied += await self.outbound.apply_due(BACKGROUND_TYPES)
                if not self._again:
                    return applied

    def _collect(self) -> None:
        """Count a finished run (its error, a state error, is raised here)."""
        if self._task is not None and self._task.done():
            task, self._task = self._task, None
            self.applied += task.result()
        if self._settling is not None and self._settling.done():
            settling, self._settling = self._settling, None
            self.applied += settling.result()
        for done in [t for t in self._rushed if t.done()]:
            self._rushed.discard(done)
            self.applied += int(done.result())

    async def finish(self) -> int:
        """Wait for the runs under way; how many deliveries were applied in all."""
        while pending := [t for t in (self._task, self._settling, *self._rushed) if t is not None
                          and not t.done()]:
            await asyncio.wait(pending)
        self._collect()
        return self.applied

    async def cancel(self) -> None:
        """Stop the runs still under way (the pass is ending on an error or a signal)."""
        for task in (self._task, self._settling, *self._rushed):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
