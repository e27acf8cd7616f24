"""The cron poll cycle (ARCHITECTURE section 6), one short transaction per step.

For each configured Telegram profile: claim the channel lease (a live owner means another
poller is at work: skip quietly); recover attempts a dead owner left applying; reserve
deliveries for open decisions routed here; then until the window ends: renew the lease, apply
due effects, long-poll getUpdates, ingest the batch and advance the cursor in one fenced
transaction, process the batch's inbox rows in one transaction (a savepoint per row), answer
their callbacks once it committed (concurrently, bounded) while the settlements go out, then
apply the rest of what processing created, deliveries last (in the pass's background; in a
`--for` window, as soon as wakeups.py sees it asked). Finally release the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from channels import inbox, messages, store
from channels.config.model import ChannelsConfig, TelegramProfile
from channels.decisions import workflows
from channels.telegram import (
    alerts,
    ended,
    holds,
    identity,
    notifying,
    pacing,
    reservations,
    wakeups,
)
from channels.telegram import updates as telegram_updates
from channels.telegram.buttons import ButtonIndex
from channels.telegram.deliverer import Deliverer
from channels.telegram.effect_kinds import EFFECT_TYPES, URGENT_TYPES
from channels.telegram.failures import ExpiryFailures, Failure, alone, expire_overdue, failure
from channels.telegram.identity import Channel
from channels.telegram.ignored import Ignored, ignored
from channels.telegram.outbound import LEASE_MARGIN_S, Outbound
from channels.telegram.reports import ChannelReport, PollOptions
from channels.telegram.shared_bots import shared_bots
from channels.telegram.transport import BotApi, CallOutcome, ProviderResult, describe
from state import effects, errors
from state.database import Database, savepoint
from state.leases import Lease
from state.resources import Actor, ActorType

if TYPE_CHECKING:  # imported where a batch is processed: an idle pass never loads it
    from channels.telegram import inbound

__all__ = ["ANSWER_CONCURRENCY", "ONCE_DEADLINE_SECONDS", "ChannelPoll", "ChannelReport",
           "PollOptions", "poll"]


_ApiFactory = Callable[[TelegramProfile, str], AbstractAsyncContextManager[BotApi]]
ONCE_DEADLINE_SECONDS = 15
_INBOX_BATCH = 100
_AMBIGUOUS = messages.MessageStatus.AMBIGUOUS
_Batch = tuple[Lease, list["inbound.Processed"]]  # a committed batch: the renewed lease, its rows
# Callback answers in flight at once, right after their batch commits, in press order: 100
# presses at 150 ms a call are answered in about 1 s, well within Telegram's 15 s.
ANSWER_CONCURRENCY = 16
_MIN_LONG_POLL_SECONDS = 1  # in a --for window, a getUpdates waits at least this long
# Waiting for the lease ends with this much window left (more than a holder has at its end).
_HANDOVER_MIN_SECONDS = _MIN_LONG_POLL_SECONDS + 2


async def poll(
    db: Database,
    config: ChannelsConfig,
    api_factory: _ApiFactory,
    options: PollOptions,
    *,
    wall_clock: Callable[[], float] = time.time,
    expiry_failures: ExpiryFailures | None = None,
) -> list[ChannelReport]:
    """Run one poll pass over the configured profiles (concurrently: one task each, each
    failing alone); the decisions whose deadline failed go to `expiry_failures`."""
    profiles = [config.profile(options.profile)] if options.profile else \
        list(config.profiles.values())
    owner_id = workflows.new_owner_id(db, "poll")
    failed = {} if expiry_failures is None else expiry_failures
    expire_overdue(db, owner_id, failed)
    start = wall_clock()
    end = start + (ONCE_DEADLINE_SECONDS if options.once else options.window_seconds)
    shared = {name: ChannelReport(Channel(config.profile(name), config).name,
                                  status=ended.PassStatus.SHARED_BOT, message=line)
              for name, line in shared_bots(config, profiles).items()}
    tasks = [
        alone(f"polling {Channel(p, config).name}", partial(_failed, Channel(p, config).name),
              ChannelPoll(
            db, Channel(p, config), owner_id, options, end, wall_clock, failed).run(api_factory))
        for p in profiles if p.name not in shared
    ]
    polled = iter(await asyncio.gather(*tasks))
    return [shared[p.name] if p.name in shared else next(polled) for p in profiles]


def _failed(name: str, found: Failure) -> ChannelReport:
    return ChannelReport(name, status=ended.PassStatus.FAILED, message=found.line,
                         exit_code=found.exit_code, failure=found)


@dataclass
class ChannelPoll:
    db: Database
    channel: Channel
    owner_id: str
    options: PollOptions
    end: float
    wall_clock: Callable[[], float]
    expiry_failures: ExpiryFailures
    report: ChannelReport = field(init=False)
    lease: Lease = field(init=False)
    index: ButtonIndex = field(default_factory=ButtonIndex)
    _answering: set[asyncio.Future[None]] = field(default_factory=set)
    _answer_slots: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(ANSWER_CONCURRENCY))
    _long_hold: bool = False  # a 429 asked to wait over an hour: this pass ends
    _listening: asyncio.Task[ProviderResult] | None = None  # the getUpdates under way

    def __post_init__(self) -> None:
        self.report = ChannelReport(self.channel.name)

    def _now(self) -> int:
        return self.db.clock.now_ms()

    @property
    def _actor(self) -> Actor:
        return Actor(ActorType.CHANNEL, self.owner_id)

    async def run(self, api_factory: _ApiFactory) -> ChannelReport:
        try:
            self.lease = await self._claim_or_wait()
        except errors.LeaseHeld:
            self.report.status = ended.PassStatus.BUSY
            self.report.message = "another poller holds this channel; skipped"
            return self.report
        try:
            token = self.channel.config.read_token(self.channel.profile)
            async with api_factory(self.channel.profile, token) as api:
                try:
                    await self._cycle(api)
                finally:
                    await self._answered()  # before the client closes
        except Exception as exc:  # this profile's pass fails alone, and is an alert
            found = failure(exc, f"polling {self.channel.name}")
            self.report.status, self.report.message = ended.PassStatus.FAILED, found.line
            self.report.exit_code, self.report.failure = found.exit_code, found
        finally:
            self._release()
        return self.report

    async def _claim_or_wait(self) -> Lease:
        """Claim the lease; a `--for` pass finding it held waits to take over at its release."""
        def ends() -> bool:
            return self.end - self.wall_clock() < _HANDOVER_MIN_SECONDS

        while True:
            try:
                return self.db.write(self._claim)
            except errors.LeaseHeld:
                if self.options.once or ends():
                    raise
            await wakeups.until_free(self.db, self.channel.channel_id,
                                     workflows.owner_process_gone, ends)

    def _claim(self, conn: Any) -> Lease:
        now = self._now()
        store.ensure_channel(conn, self.channel.channel_id, store.AdapterType.TELEGRAM,
                             self.channel.profile.name, now)
        return store.claim(conn, self.channel.channel_id, self.owner_id, now, self.db.entropy,
                           owner_gone=workflows.owner_process_gone)

    def _release(self) -> None:
        """Release the lease; its event records the pass state the alerts are derived from."""
        lease = self.lease
        failed = self.report.failure
        result = alerts.PassResult(
            self.report.status, self.report.updates_ok_at, self.report.updates_error,
            None if failed is None else {"description": failed.line,
                                         "exitCode": failed.exit_code, "cause": failed.cause},
            {decision_id: {"line": f.line, "exitCode": f.exit_code, "cause": f.cause}
             for decision_id, f in self.expiry_failures.items()})

        def command(c: Any) -> alerts.AlertReport | None:
            now = self._now()
            try:  # read-only; a bug in it must never keep the channel's lease from release
                report = alerts.settle(c, self.channel, result, now, self.options.alert_after_ms)
            except errors.StateError:
                raise
            except Exception as exc:
                self.report.errors.append({"internal": f"alerts: {type(exc).__name__}: {exc}"})
                report = None
            lease.release(c, now, payload=None if report is None else report.state)
            return report

        # A lease already lost (expired and claimed by another poller) has nothing to release.
        with contextlib.suppress(errors.StaleLease):
            self.report.alerts = self.db.write(command)

    def _renew(self) -> None:
        """Extend the channel lease when 20 s or less remain (a cheap no-op otherwise)."""
        lease = self.lease
        self.lease = self.db.write(lambda c: lease.renew(c, self._now()))

    def _until(self) -> float:
        """Calls end by the window's end, and early enough for the lease to outlive them."""
        return min(self.end, self.lease.expires_at / 1000 - LEASE_MARGIN_S)

    async def _cycle(self, raw_api: BotApi) -> None:
        if self.db.read(self._abandoned):
            self.db.write(self._recover)
        pacer = pacing.new_pacer(self._now, self.db.read(
            lambda c: holds.load(c, self.channel.channel_id)))
        api = pacing.PacedApi(raw_api, pacer, self._held, self.wall_clock)

        def outbound_of() -> Outbound:
            return Outbound(self.db, api, self.channel, self.owner_id, self.index,
                            deadline=lambda: self.end, pacer=pacer)

        outbound, deliverer = outbound_of(), Deliverer(outbound_of())
        watcher = None if self.options.once else asyncio.ensure_future(wakeups.watch(
            self.db, lambda: self._wake(deliverer)))
        try:
            await self._loop(api, outbound, deliverer)
            if self.report.status != ended.PassStatus.UNAUTHORIZED:  # nothing goes out, a bad token
                deliverer.kick()
            self.report.effects += await deliverer.finish()
        finally:
            await wakeups.stop(watcher)
            await deliverer.cancel()
        self.report.errors.extend(outbound.errors + deliverer.outbound.errors)
        self.report.refused.extend(outbound.refused + deliverer.outbound.refused)
        self.report.problems.extend(outbound.failures + deliverer.outbound.failures)
        if self.report.errors:
            last = self.report.errors[-1]
            self._renew()
            lease = self.lease
            self.db.write(lambda c: alerts.record_provider_error(
                c, lease, self.channel.channel_id, last, self._now()))

    def _held(self, key: str, hold: holds.Hold) -> None:
        """A 429 holds a chat (or the bot): keep it in the channel's state; a hold over an
        hour ends the pass (the alert says until when)."""
        pacer_holds = {key: hold}

        def command(c: Any) -> Lease:
            now = self._now()
            renewed = self.lease.renew(c, now)
            kept = holds.load(c, self.channel.channel_id)
            holds.save(c, renewed, self.channel.channel_id, {**kept, **pacer_holds}, now)
            return renewed

        self.lease = self.db.write(command)  # only once committed: a rollback keeps the old
        self._long_hold = self._long_hold or hold.long
        if hold.long and self._listening is not None:
            self._listening.cancel()  # nothing more goes out this pass: stop its long poll now

    async def _loop(self, api: BotApi, outbound: Outbound, deliverer: Deliverer) -> None:
        first = True
        while not self._long_hold:
            self._renew()
            fresh = self.db.write(self._reserve_deliveries) \
                if self.db.read(self._undelivered) else []
            if not self.options.once:  # a few new ones go at once (a pass's start: the newest)
                deliverer.rush(fresh, newest=first)
            # Retries of prompts first, settlements in the background; the other deliveries
            # only once the presses that came with this getUpdates are answered, so no press
            # waits behind them (the pass's first getUpdates is short when deliveries are due).
            deliverer.settle()
            self.report.effects += await outbound.apply_due(URGENT_TYPES)
            if self._long_hold or not await self._receive(
                    api, short=first and self.db.read(self._due_deliveries)):
                return
            first = False
            self.report.processed += await self._process_inbox(api)
            # Settlements go out in the background while the callbacks are answered; prompts
            # after (a prompt follows the answer that announces it); new deliveries in the
            # background, paced behind them (the pacer serves what presses caused first).
            deliverer.settle()
            await self._answered()
            self.report.effects += await outbound.apply_due(URGENT_TYPES)
            deliverer.kick()
            expire_overdue(self.db, self.owner_id, self.expiry_failures)
            # The window ends with too little left for a long poll (a zero-timeout getUpdates
            # loop would spin), or on a bad batch (the same bytes would come back at once).
            if self.options.once or self.end - self.wall_clock() < _MIN_LONG_POLL_SECONDS + 1 \
                    or self.report.status == ended.PassStatus.BAD_BATCH:
                return

    def _abandoned(self, conn: Any) -> list[effects.Effect]:
        return effects.abandoned(conn, EFFECT_TYPES, self._now(), scope=self.channel.channel_id)

    def _recover(self, conn: Any) -> None:
        """Attempts a dead owner left applying: ambiguous if a part may have gone out, else due."""
        now, channel_id = self._now(), self.channel.channel_id
        for effect in self._abandoned(conn):
            written = reservations.messages_of_effect(conn, channel_id, effect)
            maybe_sent = [m for m in written if m.has_intents(conn)]
            effect.interrupt(conn, self._actor, now, provably_unsent=not maybe_sent)
            notifying.interrupted(conn, self.lease, channel_id, effect, bool(maybe_sent), now)
            for message in maybe_sent:  # surfaces agree: the message is ambiguous too
                message.set_status(conn, _AMBIGUOUS, now)

    def _due_deliveries(self, conn: Any) -> bool:
        return bool(effects.list_due(conn, (reservations.DELIVER,), self._now(),
                                     scope=self.channel.channel_id))

    def _undelivered(self, conn: Any) -> bool:
        """Whether an open decision routed here has no delivery yet, or a reminder due (a
        read: most passes have nothing to reserve and need no write transaction)."""
        now = self._now()
        wanted = reservations.open_routed_decisions(conn, self.channel, now)
        return reservations.has_unreserved(conn, self.channel, wanted) or \
            bool(reservations.due_reminders(conn, self.channel, now))

    def _wake(self, deliverer: Deliverer) -> None:
        """Another connection committed: deliver a decision new to this channel at once."""
        if self._long_hold or self.report.status == ended.PassStatus.UNAUTHORIZED:
            return
        if self.db.read(self._undelivered):
            self._renew()
            deliverer.rush(self.db.write(self._reserve_deliveries))  # ahead of a backlog
        elif self.db.read(lambda c: notifying.any_due(c, self.channel.channel_id, self._now())):
            deliverer.kick()  # a notification's effects are reserved by its producer

    def _reserve_deliveries(self, conn: Any) -> list[str]:
        now = self._now()
        self.lease.verify(conn, now)  # the channel's owner reserves its deliveries
        wanted = reservations.open_routed_decisions(conn, self.channel, now)
        fresh = reservations.reserve_deliveries(conn, self.channel, wanted, self._actor, now,
                                                lease=self.lease)
        # Reminders due now (reserved only then); the background queue sends them.
        reservations.reserve_due_reminders(conn, self.channel, self._actor, now)
        return fresh

    async def _receive(self, api: BotApi, short: bool = False) -> bool:
        """One getUpdates (`short`: with no long poll) and its ingest; False when this
        channel must stop."""
        channel_id = self.channel.channel_id
        offset_text = self.db.read(lambda c: store.cursor(c, channel_id, identity.TELEGRAM_CURSOR))
        offset = None if offset_text is None else int(offset_text)
        self._renew()
        self.db.check_file()  # a deleted or replaced database must not confirm updates
        until = self._until()
        timeout = 0 if self.options.once or short else max(
            _MIN_LONG_POLL_SECONDS, min(self.options.long_poll_seconds,
                                       int(until - self.wall_clock()) - 1))
        self._listening = asyncio.ensure_future(
            api.get_updates(offset, timeout=timeout, deadline=until))
        try:
            res = await self._listening
        except asyncio.CancelledError:
            if not self._long_hold or _cancelling():
                raise
            return False  # unconfirmed, the updates it would have brought wait for the next pass
        finally:
            self._listening = None
        if res.outcome == CallOutcome.OK:
            self.report.updates_ok_at, self.report.updates_error = self._now(), None
        else:
            self.report.updates_error = {"method": "getUpdates", **describe(res)}
        if res.is_conflict:
            return self._conflict(res)
        if res.outcome == CallOutcome.REJECTED and res.error_code in (401, 404):
            self.report.status = ended.PassStatus.UNAUTHORIZED
            self.report.errors.append({"method": "getUpdates", **describe(res)})
            self.report.message = (f"the Bot API rejected the token (HTTP {res.error_code});"
                                   " fix the token file or run setup telegram again")
            return False
        if res.malformed:
            return self._refuse(res, offset)
        if res.outcome != CallOutcome.OK:
            self.report.errors.append({"method": "getUpdates", **describe(res)})
            if not self.options.once:
                await asyncio.sleep(1)  # a brief pause, then the loop tries again
            return not self.options.once
        updates = res.updates
        events = [telegram_updates.to_event(u) for u in updates]
        next_offset = telegram_updates.next_offset(updates, offset)
        if not updates and next_offset == offset:
            return True  # nothing arrived: nothing to store (an idle pass writes no event)

        def ingest(c: Any) -> Lease:
            now = self._now()
            renewed = self.lease.renew(c, now)
            inbox.ingest(c, renewed, channel_id, events, now,
                         cursor_key=identity.TELEGRAM_CURSOR, next_cursor=next_offset)
            return renewed

        self.lease = self.db.write(ingest)
        self.report.updates += len(updates)
        if updates and next_offset == offset:
            return self._unconfirmable(len(updates))
        return True

    def _refuse(self, res: ProviderResult, offset: int | None) -> bool:
        """A getUpdates answer that is not a batch: nothing stored, the cursor stays."""
        return self._ended(*ended.refused(res, offset))

    def _unconfirmable(self, count: int) -> bool:
        """A batch with no usable update_id past the cursor: processed, and the pass ends."""
        return not self._ended(*ended.unconfirmable(count))  # the batch is processed

    def _conflict(self, res: ProviderResult) -> bool:
        return self._ended(*ended.conflict(res))

    def _ended(self, status: ended.PassStatus, message: str, error: dict[str, Any]) -> bool:
        self.report.status, self.report.message = status, message
        self.report.errors.append(error)
        return False

    async def _process_inbox(self, api: BotApi) -> int:
        """Process the inbox in batches, one transaction each; the callbacks of a batch are
        answered once it committed, by a bounded task that holds up nothing that follows."""
        count = 0
        while rows := self.db.read(lambda c: inbox.unprocessed(c, self.channel.channel_id,
                                                               _INBOX_BATCH)):
            def batch(c: Any, rows: list[inbox.InboxRow] = rows) -> _Batch:
                return self._process_batch(c, rows)

            self.lease, done = self.db.write(batch)
            count += len(rows)
            for processed in done:
                if processed.callback is not None:
                    self._answering.add(asyncio.ensure_future(
                        self._answer(api, *processed.callback)))
            await asyncio.sleep(0)  # the answers start now, before the next batch is read
        return count

    def _process_batch(self, conn: Any, rows: list[inbox.InboxRow]) -> _Batch:
        """Each row in its own savepoint: a row that hits a bug, or whose writes contradict
        what is stored, is undone alone and recorded as ignored:error, never retried forever
        (undoing the batch would bring the same rows back every pass: a wedged channel); any
        other StateError (the lease, the database) is not the row's fault and undoes the
        whole batch. The renewed lease comes back, for the caller to keep once committed."""
        from channels.telegram import inbound, membership  # only a pass with updates needs them

        lease = self.lease.renew(conn, self._now())
        done = []
        for row in rows:
            now = self._now()
            try:
                with savepoint(conn, "inbox_row"):
                    done.append(inbound.process(conn, self.channel, self.index, lease,
                                                row, now))
                if changed := membership.alert_for(self.channel, done[-1].result):
                    self.report.problems.append(changed)  # a config change needed at once
            except Exception as exc:
                if isinstance(exc, errors.StateError) and not isinstance(exc, errors.Contradiction):
                    raise
                done.append(self._row_failed(conn, row, exc, now))
        return lease, done

    def _row_failed(self, conn: Any, row: inbox.InboxRow, exc: Exception,
                    now: int) -> inbound.Processed:
        """A row that failed alone: recorded as ignored:error, told in one line, and a press
        answered (the person must not think it counted)."""
        found = failure(exc, "processing it")
        self.report.problems.append(
            Failure(f"update {row.external_event_id}: {found.line}", found.exit_code,
                    found.internal))
        result = {**ignored(Ignored.ERROR), "message": found.line[:200]}
        row.mark_processed(conn, result, now)
        from channels.telegram import inbound  # loaded by _process_batch already
        return inbound.failed(row, result)

    async def _answer(self, api: BotApi, callback_id: str, text: str) -> None:
        async with self._answer_slots:
            res = await api.answer_callback_query(callback_id, text, deadline=self._until())
        if res.outcome != CallOutcome.OK:  # the person sees a spinner; nothing to retry
            self.report.errors.append({"method": "answerCallbackQuery", **describe(res)})

    async def _answered(self) -> None:
        """Wait for the callback answers in flight."""
        while self._answering:
            pending, self._answering = self._answering, set()
            await asyncio.gather(*pending)


def _cancelling() -> bool:
    """Whether this task itself is being cancelled (Ctrl-C, SIGTERM), not only what it awaits."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
