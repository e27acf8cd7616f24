"""New deliveries (and reminders) go out in the background of a pass, behind what presses
cause.

The poll cycle receives, processes and answers presses while a `Deliverer` applies the due
deliveries in a task of its own, at the pacer's NORMAL priority: a settlement or prompt that
a press causes takes the next slot of its chat ahead of them, and a press never waits for a
long queue of deliveries to drain.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from channels.telegram.outbound import BACKGROUND_TYPES, Outbound
from channels.telegram.pacing import NORMAL, sending_as


@dataclass
class Deliverer:
    """Applies the channel's due deliveries in one background task at a time."""

    outbound: Outbound
    applied: int = 0
    _task: asyncio.Task[int] | None = None
    _again: bool = False

    def kick(self) -> None:
        """Deliver what is due now (and, if a run is under way, once more after it)."""
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._collect()
        self._task = asyncio.ensure_future(self._run())

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

    async def finish(self) -> int:
        """Wait for the run under way; how many deliveries were applied in all."""
        if self._task is not None:
            await asyncio.wait([self._task])
        self._collect()
        return self.applied

    async def cancel(self) -> None:
        """Stop a run still under way (the pass is ending on an error or a signal)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
