"""The cron poll cycle (ARCHITECTURE section 6), one short transaction per step.

For each configured Telegram profile: claim the channel lease (a live owner means another
poller is at work: skip quietly); recover attempts a dead owner left applying; reserve
deliveries for open decisions routed here; then until the window ends: renew the lease, apply
due effects, long-poll getUpdates, ingest the batch and advance the cursor in one fenced
transaction, process the batch's inbox rows in one transaction (a savepoint per row), answer
their callbacks once it committed (in press order, by one bounded task) while the
settlements go out, then apply the rest of what processing created. Finally release the
lease. In a `--for` window the effects are applied by a second task beside that loop
(wakeups.py), so a decision asked during a long poll, or a press behind a backlog of
deliveries, does not wait for the long poll or the backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from channels import inbox, messages, store
from channels.config.files import bot_id
from channels.config.model import ChannelsConfig, TelegramProfile
from channels.decisions import workflows
from channels.errors import ChannelsError
from channels.telegram import alerts, deliveries, identity, inbound, wakeups
from channels.telegram import updates as telegram_updates
from channels.telegram.buttons import ButtonIndex
from channels.telegram.deliveries import SETTLE
from channels.telegram.identity import Channel
from channels.telegram.outbound import EFFECT_TYPES, LEASE_MARGIN_S, Outbound
from channels.transport import OK, REJECTED, BotApi, ProviderResult, describe
from state import effects, leases
from state.database import Database, savepoint
from state.errors import (
    BlobMismatch,
    EffectConflict,
    LeaseHeld,
    StaleLease,
    StaleRevision,
    StateError,
)
from state.leases import Lease
from state.resources import Actor

ApiFactory = Callable[[TelegramProfile, str], AbstractAsyncContextManager[BotApi]]
LONG_POLL_SECONDS = 20
ONCE_DEADLINE_SECONDS = 15
INBOX_BATCH = 100
# Callback answers in flight at once: one, so they go out in press order (a second press
# of the same button is answered after the first); they still overlap the settlements.
ANSWER_CONCURRENCY = 1
SETTLE_CONCURRENCY = 4  # settlements of a batch in flight at once (independent decisions)
MIN_LONG_POLL_SECONDS = 1  # in a --for window, a getUpdates waits at least this long


# State errors that are one row's own: its data contradicts what is stored.
_ROW_FAULTS = (EffectConflict, BlobMismatch, StaleRevision)


@dataclass(frozen=True, slots=True)
class PollOptions:
    """`poll --once` (the default) or `poll --for SECONDS`, optionally one profile."""

    window_seconds: float = 0.0
    profile: str | None = None
    long_poll_seconds: int = LONG_POLL_SECONDS
    alert_after_ms: int = alerts.DEFAULT_ALERT_AFTER_MS

    @property
    def once(self) -> bool:
        return self.window_seconds <= 0


@dataclass
class ChannelReport:
    """What one channel's pass did (counts and codes only: no ids)."""

    channel: str
    status: str = "polled"  # polled | busy | conflict | unauthorized | bad_batch | shared_bot
    updates: int = 0
    processed: int = 0
    effects: int = 0
    message: str = ""
    errors: list[dict[str, Any]] = field(default_factory=list)
    updates_ok_at: int | None = None  # the last successful getUpdates of this pass
    updates_error: dict[str, Any] | None = None  # the last getUpdates, when it failed
    alerts: alerts.AlertReport | None = None  # what needs a person (None: not polled)


async def poll(
    db: Database,
    config: ChannelsConfig,
    api_factory: ApiFactory,
    options: PollOptions,
    *,
    wall_clock: Callable[[], float] = time.time,
) -> list[ChannelReport]:
    """Run one poll pass over the configured profiles (concurrently: one task each)."""
    profiles = [config.profile(options.profile)] if options.profile else \
        list(config.profiles.values())
    owner_id = workflows.new_owner_id(db, "poll")
    workflows.expire_overdue(db, owner_id)
    start = wall_clock()
    end = start + (ONCE_DEADLINE_SECONDS if options.once else options.window_seconds)
    shared = _shared_bots(config, profiles)
    tasks = [
        _ChannelPoll(db, Channel(p, config), owner_id, options, end, wall_clock).run(api_factory)
        for p in profiles if p.name not in shared
    ]
    polled = iter(await asyncio.gather(*tasks))
    return [shared[p.name] if p.name in shared else next(polled) for p in profiles]


def _shared_bots(config: ChannelsConfig,
                 profiles: list[TelegramProfile]) -> dict[str, ChannelReport]:
    """Profiles whose bot an earlier profile already polls (one bot serves one profile: two
    getUpdates consumers split the bot's updates and both deliver every decision): each gets
    a report instead of a pass. A token that cannot be read is left to its profile's pass."""
    first: dict[tuple[str, str], str] = {}
    shared: dict[str, ChannelReport] = {}
    if len(profiles) < 2:
        return shared  # the usual case reads no token twice
    for profile in profiles:
        try:
            bot = bot_id(config.read_token(profile))
        except ChannelsError:
            continue
        owner = first.setdefault((bot, profile.api_base_url), profile.name)
        if owner != profile.name:
            shared[profile.name] = ChannelReport(
                Channel(profile, config).name, status="shared_bot", message=(
                    f"profile {profile.name} uses bot {bot}, which profile {owner} already"
                    " polls; one bot serves one profile (two would split its updates and send"
                    f" every decision twice): remove profile {profile.name} from channels.json"
                    " or give it a bot of its own (setup telegram --profile"
                    f" {profile.name} --token-file ...)"))
    return shared


@dataclass
class _ChannelPoll:
    db: Database
    channel: Channel
    owner_id: str
    options: PollOptions
    end: float
    wall_clock: Callable[[], float]
    report: ChannelReport = field(init=False)
    lease: Lease = field(init=False)
    index: ButtonIndex = field(default_factory=ButtonIndex)
    _answering: set[asyncio.Future[None]] = field(default_factory=set)
    _answer_slots: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(ANSWER_CONCURRENCY))

    def __post_init__(self) -> None:
        self.report = ChannelReport(self.channel.name)

    def _now(self) -> int:
        return self.db.clock.now_ms()

    @property
    def _actor(self) -> Actor:
        return Actor("channel", self.owner_id)

    async def run(self, api_factory: ApiFactory) -> ChannelReport:
        try:
            self.lease = self.db.write(self._claim)
        except LeaseHeld:
            self.report.status = "busy"
            self.report.message = "another poller holds this channel; skipped"
            return self.report
        try:
            token = self.channel.config.read_token(self.channel.profile)
            async with api_factory(self.channel.profile, token) as api:
                try:
                    await self._cycle(api)
                finally:
                    await self._answered()  # before the client closes
        finally:
            self._release()
        return self.report

    def _claim(self, conn: Any) -> Lease:
        now = self._now()
        store.ensure_channel(conn, self.channel.channel_id, "telegram", self.channel.profile.name,
                             now)
        return store.claim(conn, self.channel.channel_id, self.owner_id, now, self.db.entropy)

    def _release(self) -> None:
        """Release the lease; its event records the pass state the alerts are derived from."""
        lease = self.lease
        result = alerts.PassResult(self.report.status, self.report.updates_ok_at,
                                   self.report.updates_error)

        def command(c: Any) -> alerts.AlertReport | None:
            now = self._now()
            try:  # read-only; a bug in it must never keep the channel's lease from release
                report = alerts.settle(c, self.channel, result, now, self.options.alert_after_ms)
            except StateError:
                raise
            except Exception as exc:
                self.report.errors.append({"internal": f"alerts: {type(exc).__name__}: {exc}"})
                report = None
            leases.release(c, lease, now, payload=None if report is None else report.state)
            return report

        # A lease already lost (expired and claimed by another poller) has nothing to release.
        with contextlib.suppress(StaleLease):
            self.report.alerts = self.db.write(command)

    def _renew(self) -> None:
        """Extend the channel lease when 20 s or less remain (a cheap no-op otherwise)."""
        lease = self.lease
        self.lease = self.db.write(lambda c: leases.renew(c, lease, self._now()))

    def _until(self) -> float:
        """Calls end by the window's end, and early enough for the lease to outlive them."""
        return min(self.end, self.lease.expires_at / 1000 - LEASE_MARGIN_S)

    async def _cycle(self, api: BotApi) -> None:
        if self.db.read(self._abandoned):
            self.db.write(self._recover)
        outbound = Outbound(self.db, api, self.channel, self.owner_id, self.index,
                            deadline=lambda: self.end)
        # In a --for window the outbound work runs beside the receive loop (wakeups.py), so
        # a decision asked during a long poll, or a press behind a backlog, waits for neither.
        drain = wakeups.Drain(self.db, outbound, self.channel.channel_id, self._reserve_new,
                              self.wall_clock, SETTLE_CONCURRENCY)
        background = None if self.options.once else \
            asyncio.ensure_future(drain.run(lambda: self.end))
        try:
            await self._loop(api, outbound, drain, background)
        except asyncio.CancelledError:
            await wakeups.finish(drain, background, cancel=True)
            raise
        except BaseException:
            with contextlib.suppress(Exception):  # the loop's own error is the one to report
                await wakeups.finish(drain, background)
            raise
        # A healthy window keeps sending to its very end (the loop stops receiving up to 1 s
        # before it: too short for a long poll); a stopped channel stops sending now.
        await wakeups.finish(drain, background, at_end=self.report.status == "polled")
        self.report.effects += drain.applied
        self.report.errors.extend(outbound.errors)
        if self.report.errors:
            last = self.report.errors[-1]
            self._renew()
            lease = self.lease
            self.db.write(lambda c: store.record_provider_error(
                c, lease, self.channel.channel_id, last, self._now()))

    async def _loop(self, api: BotApi, outbound: Outbound, drain: wakeups.Drain,
                    background: asyncio.Future[None] | None) -> None:
        """Receive until the window ends; without a background drain (`--once`), apply
        every due effect in line, as one short pass."""
        while True:
            self._renew()
            if background is None:
                self._reserve_new()
                self.report.effects += await outbound.apply_due()
            if not await self._receive(api):
                break
            drain.hold_prompts = True  # until the batch's callbacks are answered (nudge)
            self.report.processed += await self._process_inbox(api)
            if background is None:
                # Settlements go out while the callbacks are answered; prompts and
                # deliveries after: a prompt follows the answer that announces it.
                self.report.effects += await outbound.apply_due((SETTLE,), SETTLE_CONCURRENCY)
                await self._answered()
                self.report.effects += await outbound.apply_due()
            workflows.expire_overdue(self.db, self.owner_id)
            if background is not None:
                # The drain sends what the batch caused (settlements, then prompts) ahead of
                # any further delivery, while this loop is already back in getUpdates.
                await self._answered()
                drain.nudge()
            # The window ends once too little of it is left for a long poll: a zero-timeout
            # getUpdates in a loop would spin (hundreds of calls) until the last second. One
            # last short long poll still takes what is pressed in the window's final seconds.
            if self.options.once or self.end - self.wall_clock() < MIN_LONG_POLL_SECONDS or \
                    self.report.status == "bad_batch":  # the same bytes would come back at once
                break
            if background is not None and background.done():
                break  # the drain failed: its error is raised when the pass ends

    def _abandoned(self, conn: Any) -> list[effects.Effect]:
        return effects.abandoned(conn, EFFECT_TYPES, self._now(), scope=self.channel.channel_id)

    def _recover(self, conn: Any) -> None:
        """Attempts a dead owner left applying become interrupted: ambiguous when a part may
        have gone out, pending again when no part is left as an intent."""
        now = self._now()
        for effect in self._abandoned(conn):
            maybe_sent = [m for m in _messages_of(conn, self.channel.channel_id, effect)
                          if messages.message_has_intents(conn, m)]
            effects.interrupt(conn, effect, self._actor, now, provably_unsent=not maybe_sent)
            for message_id in maybe_sent:  # surfaces agree: the message is ambiguous too
                messages.set_message_status(conn, message_id, "ambiguous", now)

    def _undelivered(self, conn: Any) -> bool:
        """Whether an open decision routed here has no delivery yet (a read: most passes
        have nothing to reserve and need no write transaction)."""
        now = self._now()
        return deliveries.has_unreserved(conn, self.channel,
                                         deliveries.open_routed_decisions(conn, self.channel, now))

    def _reserve_new(self) -> None:
        """Reserve deliveries for open decisions new to this channel (a read when none)."""
        if self.db.read(self._undelivered):
            self.db.write(self._reserve_deliveries)

    def _reserve_deliveries(self, conn: Any) -> None:
        now = self._now()
        leases.verify(conn, self.lease, now)  # the channel's owner reserves its deliveries
        wanted = deliveries.open_routed_decisions(conn, self.channel, now)
        deliveries.reserve_deliveries(conn, self.channel, wanted, self._actor, now)

    async def _receive(self, api: BotApi) -> bool:
        """One getUpdates and its ingest; False when this channel must stop."""
        channel_id = self.channel.channel_id
        offset_text = self.db.read(lambda c: store.cursor(c, channel_id, identity.TELEGRAM_CURSOR))
        offset = None if offset_text is None else int(offset_text)
        self._renew()
        until = self._until()
        timeout = 0 if self.options.once else max(
            MIN_LONG_POLL_SECONDS, min(self.options.long_poll_seconds,
                                       int(until - self.wall_clock()) - 1))
        res = await api.get_updates(offset, timeout=timeout, deadline=until)
        if res.outcome == OK:
            self.report.updates_ok_at, self.report.updates_error = self._now(), None
        else:
            self.report.updates_error = {"method": "getUpdates", **describe(res)}
        if res.is_conflict:
            return self._conflict(res)
        if res.outcome == REJECTED and res.error_code in (401, 404):
            self.report.status = "unauthorized"
            self.report.errors.append({"method": "getUpdates", **describe(res)})
            self.report.message = (f"the Bot API rejected the token (HTTP {res.error_code});"
                                   " fix the token file or run setup telegram again")
            return False
        if res.malformed:
            return self._refuse(res, offset)
        if res.outcome != OK:
            self.report.errors.append({"method": "getUpdates", **describe(res)})
            if not self.options.once:
                await asyncio.sleep(1)  # a brief pause, then the loop tries again
            return not self.options.once
        updates = res.updates
        events = [telegram_updates.to_event(u) for u in updates]
        next_offset = telegram_updates.next_offset(updates, offset)
        if not updates and next_offset == offset:
            return True  # nothing arrived: nothing to store (an idle pass writes no event)

        def ingest(c: Any) -> None:
            now = self._now()
            self.lease = leases.renew(c, self.lease, now)
            inbox.ingest(c, self.lease, channel_id, events, now,
                         cursor_key=identity.TELEGRAM_CURSOR, next_cursor=next_offset)

        self.db.write(ingest)
        self.report.updates += len(updates)
        if updates and next_offset == offset:
            return self._unconfirmable(len(updates))
        return True

    def _refuse(self, res: ProviderResult, offset: int | None) -> bool:
        """A getUpdates answer that is not a batch: nothing stored, the cursor stays."""
        self.report.status = "bad_batch"
        self.report.errors.append({"method": "getUpdates", **describe(res)})
        self.report.message = (f"getUpdates returned a response that is not a batch of updates"
                               f" ({res.description}); nothing was stored and the cursor stays"
                               f" at {offset if offset is not None else 'the start'}")
        return False

    def _unconfirmable(self, count: int) -> bool:
        """A batch whose items carry no usable update_id past the cursor: they were recorded
        (and are processed, as ignored), but no offset can confirm them, so Telegram sends
        them again at once: this pass ends after processing."""
        self.report.status = "bad_batch"
        self.report.message = (
            f"getUpdates returned {count} update(s) without a usable update_id past the"
            " cursor; they were recorded as ignored, and the cursor moves on when a later"
            " update arrives")
        self.report.errors.append({"method": "getUpdates", "outcome": "unconfirmable",
                                   "description": self.report.message})
        return True

    def _conflict(self, res: ProviderResult) -> bool:
        self.report.status = "conflict"
        self.report.errors.append({"method": "getUpdates", **describe(res)})
        webhook = "webhook" in (res.description or "").lower()
        self.report.message = (
            "a webhook is active for this bot; remove it (Bot API deleteWebhook) to poll"
            if webhook else
            "another getUpdates poller is using this bot token; run only one poller per bot"
        )
        return False

    async def _process_inbox(self, api: BotApi) -> int:
        """Process the inbox in batches, one transaction each; the callbacks of a batch are
        answered once it committed, by a bounded task that holds up nothing that follows."""
        count = 0
        while rows := self.db.read(lambda c: inbox.unprocessed(c, self.channel.channel_id,
                                                               INBOX_BATCH)):
            def batch(c: Any, rows: list[inbox.InboxRow] = rows) -> list[inbound.Processed]:
                return self._process_batch(c, rows)

            done = self.db.write(batch)
            count += len(rows)
            for processed in done:
                if processed.callback is not None:
                    self._answering.add(asyncio.ensure_future(
                        self._answer(api, *processed.callback)))
        return count

    def _process_batch(self, conn: Any, rows: list[inbox.InboxRow]) -> list[inbound.Processed]:
        """Each row in its own savepoint: a row that hits a bug, or whose writes contradict
        what is stored, is undone alone and recorded as ignored:error, never retried forever
        (undoing the batch would bring the same rows back every pass: a wedged channel); any
        other StateError (the lease, the database) is not the row's fault and undoes the
        whole batch."""
        self.lease = leases.renew(conn, self.lease, self._now())
        done = []
        for row in rows:
            now = self._now()
            try:
                with savepoint(conn, "inbox_row"):
                    done.append(inbound.process(conn, self.channel, self.index, self.lease,
                                                row, now))
            except Exception as exc:
                if isinstance(exc, StateError) and not isinstance(exc, _ROW_FAULTS):
                    raise
                result = {"result": "ignored:error", "message": str(exc)[:200]}
                inbox.mark_processed(conn, self.channel.channel_id, row.external_event_id,
                                     result, now)
        return done

    async def _answer(self, api: BotApi, callback_id: str, text: str) -> None:
        async with self._answer_slots:
            res = await api.answer_callback_query(callback_id, text, deadline=self._until())
        if res.outcome != OK:  # the person sees a spinner; nothing to retry
            self.report.errors.append({"method": "answerCallbackQuery", **describe(res)})

    async def _answered(self) -> None:
        """Wait for the callback answers in flight."""
        while self._answering:
            pending, self._answering = self._answering, set()
            await asyncio.gather(*pending)


def _messages_of(conn: Any, channel_id: str, effect: effects.Effect) -> list[str]:
    """The channel messages an effect writes (to check for intent rows)."""
    p = effects.payload(conn, effect)
    decision_id = str(p["decisionId"])
    if effect.effect_type == deliveries.PROMPT:
        return [deliveries.prompt_of(p)]
    if effect.effect_type == deliveries.NOTICE:
        return [deliveries.notice_message_id(channel_id, str(p["key"]))]
    if effect.effect_type == deliveries.REMIND:
        return [deliveries.reminder_message_id(channel_id, decision_id, int(p["number"]))]
    if effect.effect_type == deliveries.DELIVER:
        return [deliveries.delivery_message_id(channel_id, p)]
    return [messages.message_id_for(channel_id, "settlement", decision_id)]
