"""Every Bot API send paced to Telegram's limits, and every 429 honoured for every method.

The limits (the Bot FAQ; telegram-ptb-apsw-facts A9): about one message a second to one chat
("short bursts are allowed, then 429s follow"), at most 20 a minute to one group, about 30 a
second for the whole bot. A chat's messages are paced as a bucket of CHAT_BURST slots that
refills one a second: a settlement (two calls) and the next decision go at once, and no
more than one a second goes on average. One `Pacer` serves a channel's pass (one bot), across
the concurrent sends of that pass: a send asks for a slot, and the slots that must wait are
granted in priority order: the prompts a press caused, then a decision asked just now, then
settlements, then the other deliveries (a backlog). Settlements and the backlog leave the
bucket's last slot to the first two, so a new question or a prompt never waits behind a
backlog's pace; callback answers are not messages and only holds apply to them.

A 429 holds its chat (the whole bot for a call bound to no chat) for `retry_after`; while a
hold lasts, nothing goes to that chat by any method, and a send that could only go after
its deadline is refused at once with a `Held` result (provably not sent, rate limited), so
the effect is rescheduled for when the hold ends instead of being tried into the 429. The
holds are kept in the channel's state (`holds`), so they outlast the pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final

from channels.telegram.holds import BOT, Hold
from channels.telegram.transport import BotApi, CallOutcome, ProviderResult

__all__ = [
    "BOT_PER_SECOND", "CHAT_BURST", "CHAT_INTERVAL_MS", "FRESH", "GROUP_PER_MINUTE", "NORMAL",
    "SETTLING", "URGENT", "PacedApi", "Pacer", "new_pacer", "sending_as",
]


URGENT: Final = 0  # callback answers, prompts: a person waits for them
FRESH: Final = 1  # a decision asked just now, while the pass runs: someone's call waits
SETTLING: Final = 2  # keyboards off and outcome posts: the press was answered already
NORMAL: Final = 3  # the other deliveries (a backlog)
CHAT_INTERVAL_MS: Final = 1_000  # one message a second to one chat, on average
CHAT_BURST: Final = 3  # a short burst within that
_RESERVED_SLOTS: Final = 1  # of a chat's bucket, kept by settlements and the backlog for the above
GROUP_PER_MINUTE: Final = 20  # to one group (a negative chat id)
BOT_PER_SECOND: Final = 30  # for the whole bot
_DEFAULT_RETRY_AFTER_S: Final = 1.0  # a 429 that names no retry_after
_RATE_LIMITED_TRIES: Final = 3  # a call tried into a 429 this often, each after its hold


def new_pacer(now_ms: Callable[[], int], holds: dict[str, Hold]) -> Pacer:
    """A pass's pacer, with the documented limits (the benches lift them through their own
    launcher, bench/unpaced.py, the tests through tests/unpaced.py: the product has no
    switch for it)."""
    return Pacer(now_ms, holds)


# The priority of the sends made in this task (the outbound sets it per effect).
_priority: ContextVar[int] = ContextVar("telegram_send_priority", default=URGENT)


@contextlib.contextmanager
def sending_as(level: int) -> Iterator[None]:
    """Run the sends of a block at this priority."""
    token = _priority.set(level)
    try:
        yield
    finally:
        _priority.reset(token)


def _is_group(chat: str) -> bool:
    return chat.startswith("-")


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(eq=False)
class _Waiter:
    rank: tuple[int, int]  # (level, arrival)
    chat: str | None  # None: a call bound to no chat (answerCallbackQuery)
    paced: bool  # counts toward the message limits (False: only holds apply)
    latest: int  # monotonic ms after which it would be too late: refused instead
    granted: asyncio.Future[bool]


@dataclass
class Pacer:
    """Slots for the sends of one bot, in priority order, within the limits and the holds.

    Holds are in the database's time (epoch ms, `now_ms`: they are stored, and a test moves
    that clock); the limits are measured in monotonic time (`mono_ms`)."""

    now_ms: Callable[[], int]
    holds: dict[str, Hold] = field(default_factory=dict)
    chat_interval_ms: int = CHAT_INTERVAL_MS
    chat_burst: int = CHAT_BURST
    group_per_minute: int = GROUP_PER_MINUTE
    bot_per_second: int = BOT_PER_SECOND
    mono_ms: Callable[[], int] = _monotonic_ms
    _bucket: dict[str, tuple[float, int]] = field(default_factory=dict)  # chat -> (slots, at)
    _group: dict[str, deque[int]] = field(default_factory=dict)
    _bot: deque[int] = field(default_factory=deque)
    _waiters: list[_Waiter] = field(default_factory=list)
    _seq: Iterator[int] = field(default_factory=itertools.count)
    _timer: asyncio.TimerHandle | None = None

    def held_until(self, chat: str | None) -> int:
        """Until when (epoch ms) a 429 holds this chat (or the bot); 0 when it is free."""
        bot = self.holds.get(BOT)
        until = bot.until if bot else 0
        own = self.holds.get(chat) if chat is not None else None
        return max(until, own.until if own else 0)

    def hold(self, chat: str | None, retry_after: float | None) -> Hold:
        """Record a 429: hold the chat (the bot when None) for `retry_after` seconds."""
        now = self.now_ms()
        seconds = _DEFAULT_RETRY_AFTER_S if retry_after is None else max(0.0, retry_after)
        key = BOT if chat is None else chat
        old = self.holds.get(key)
        hold = Hold(now, now + math.ceil(seconds * 1000))
        if old is not None and old.until >= hold.until:
            hold = old
        self.holds[key] = hold
        self._dispatch()
        return hold

    def _slots(self, chat: str, mono: int) -> float:
        """The chat's bucket now: full unless recent sends took from it."""
        slots, at = self._bucket.get(chat, (float(self.chat_burst), mono))
        if self.chat_interval_ms <= 0:
            return float(self.chat_burst)
        return min(float(self.chat_burst), slots + (mono - at) / self.chat_interval_ms)

    def ready_in(self, chat: str | None, paced: bool = True, level: int = NORMAL) -> int:
        """How long (ms) until a send to `chat` at `level` may go, holds and limits
        included; 0: now."""
        wait = self.held_until(chat) - self.now_ms()
        if paced:
            mono = self.mono_ms()
            if chat is not None:
                needed = 1 + (_RESERVED_SLOTS if level >= SETTLING else 0)
                missing = min(needed, self.chat_burst) - self._slots(chat, mono)
                if missing > 0:
                    wait = max(wait, math.ceil(missing * self.chat_interval_ms))
                window = self._group.get(chat)
                if window is not None and len(window) >= self.group_per_minute:
                    wait = max(wait, window[-self.group_per_minute] + 60_000 - mono)
            if len(self._bot) >= self.bot_per_second:
                wait = max(wait, self._bot[-self.bot_per_second] + 1_000 - mono)
        return max(0, wait)

    async def acquire(self, chat: str | None, within_ms: int, *, paced: bool = True,
                      level: int | None = None) -> bool:
        """Wait for a slot; False (at once, or as soon as it is clear) when it would only
        come more than `within_ms` from now."""
        waiter = _Waiter((_priority.get() if level is None else level, next(self._seq)), chat,
                         paced, self.mono_ms() + within_ms,
                         asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        self._dispatch()
        try:
            return await waiter.granted
        finally:
            if waiter in self._waiters:  # cancelled while waiting
                self._waiters.remove(waiter)
                self._dispatch()

    def blocked(self, payload: Mapping[str, Any] | None, within_ms: int) -> bool:
        """Whether an effect (its payload: `recipients` or a `chatId`; None when its chats are
        not known yet) could send nothing within `within_ms`: the bot is held that long, or
        every chat it goes to is."""
        if self.held_until(None) - self.now_ms() > within_ms:
            return True
        if payload is None:
            return False
        chats = [str(r) for r in payload.get("recipients", [])] if "recipients" in payload \
            else [str(payload["chatId"])] if "chatId" in payload else []
        return bool(chats) and all(self.ready_in(chat) > within_ms for chat in chats)

    def _dispatch(self) -> None:
        """Grant every waiter that may go now, best rank first; refuse those that would be
        too late; wake again when the next one may go."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        following: int | None = None
        for waiter in sorted(self._waiters, key=lambda w: w.rank):
            if waiter.granted.done():
                self._waiters.remove(waiter)
                continue
            wait = self.ready_in(waiter.chat, waiter.paced, waiter.rank[0])
            if wait <= 0:
                self._record(waiter)
                waiter.granted.set_result(True)
                self._waiters.remove(waiter)
            elif self.mono_ms() + wait > waiter.latest:
                waiter.granted.set_result(False)
                self._waiters.remove(waiter)
            else:
                following = wait if following is None else min(following, wait)
        if following is not None:
            self._timer = asyncio.get_running_loop().call_later(following / 1000,
                                                                self._dispatch)

    def _record(self, waiter: _Waiter) -> None:
        if not waiter.paced:
            return
        now = self.mono_ms()
        self._bot.append(now)
        while len(self._bot) > self.bot_per_second:
            self._bot.popleft()
        if waiter.chat is not None:
            self._bucket[waiter.chat] = (self._slots(waiter.chat, now) - 1, now)
            if _is_group(waiter.chat):
                window = self._group.setdefault(waiter.chat, deque())
                window.append(now)
                while len(window) > self.group_per_minute:
                    window.popleft()


@dataclass(frozen=True, slots=True)
class _Held:
    """A send refused before it left: a 429's hold lasts past the call's deadline (or no slot
    comes before it). Shaped like a 429, so it is rescheduled, never counted as a failure."""

    retry_after: float
    description: str
    outcome: str = CallOutcome.REJECTED
    error_code: int | None = 429
    result: Any = None
    migrate_to_chat_id: int | None = None
    message_id: int | None = None
    is_conflict: bool = False
    is_rate_limited: bool = True
    is_message_not_modified: bool = False
    is_message_to_edit_not_found: bool = False
    malformed: bool = False

    @property
    def updates(self) -> list[Any]:
        return []


class PacedApi:
    """A `BotApi` whose sends take their slot from a `Pacer` first. getUpdates is not paced.

    `on_hold` is told of every new hold (to keep it in the channel's state)."""

    def __init__(self, api: BotApi, pacer: Pacer, on_hold: Callable[[str, Hold], None],
                 wall_clock: Callable[[], float] = time.time) -> None:
        self._api = api
        self.pacer = pacer
        self._on_hold = on_hold
        self._wall = wall_clock

    async def get_updates(self, offset: int | None, timeout: int = 0, limit: int = 100,
                          allowed_updates: Sequence[str] | None = None, *,
                          deadline: float | None = None) -> ProviderResult:
        if allowed_updates is None:  # the client's default set
            return await self._api.get_updates(offset, timeout, limit, deadline=deadline)
        return await self._api.get_updates(offset, timeout, limit, allowed_updates,
                                           deadline=deadline)

    async def send_message(self, chat_id: int | str, text: str,
                           reply_markup: Mapping[str, Any] | None = None,
                           message_thread_id: int | None = None, *,
                           entities: Sequence[Mapping[str, Any]] | None = None,
                           deadline: float | None = None, **more: Any) -> ProviderResult:
        return await self._paced(str(chat_id), True, deadline, lambda: self._api.send_message(
            chat_id, text, reply_markup, message_thread_id, entities=entities,
            deadline=deadline, **more))

    async def send_document(self, chat_id: int | str, file_name: str, data: bytes, *,
                            caption: str | None = None, disable_notification: bool = False,
                            deadline: float | None = None) -> ProviderResult:
        return await self._paced(str(chat_id), True, deadline, lambda: self._api.send_document(
            chat_id, file_name, data, caption=caption,
            disable_notification=disable_notification, deadline=deadline))

    async def edit_message_reply_markup(self, chat_id: int | str, message_id: int, *,
                                        reply_markup: Mapping[str, Any] | None = None,
                                        deadline: float | None = None) -> ProviderResult:
        return await self._paced(str(chat_id), True, deadline, lambda: (
            self._api.edit_message_reply_markup(chat_id, message_id, reply_markup=reply_markup,
                                                deadline=deadline)))

    async def set_message_reaction(self, chat_id: int | str, message_id: int, emoji: str, *,
                                   deadline: float | None = None) -> ProviderResult:
        return await self._paced(str(chat_id), True, deadline, lambda: (
            self._api.set_message_reaction(chat_id, message_id, emoji, deadline=deadline)))

    async def edit_message_text(self, chat_id: int | str, message_id: int, text: str, *,
                                entities: Sequence[Mapping[str, Any]] | None = None,
                                deadline: float | None = None) -> ProviderResult:
        return await self._paced(str(chat_id), True, deadline, lambda: (
            self._api.edit_message_text(chat_id, message_id, text, entities=entities,
                                        deadline=deadline)))

    async def answer_callback_query(self, callback_query_id: str, text: str | None = None, *,
                                    deadline: float | None = None) -> ProviderResult:
        # Not a message: no chat's or the bot's message limit applies, only a hold.
        return await self._paced(None, False, deadline, lambda: self._api.answer_callback_query(
            callback_query_id, text, deadline=deadline))

    async def _paced(self, chat: str | None, paced: bool, deadline: float | None,
                     call: Callable[[], Awaitable[ProviderResult]]) -> ProviderResult:
        res: ProviderResult | None = None
        for _ in range(_RATE_LIMITED_TRIES):
            if not await self._slot(chat, paced, deadline):
                return self._held(chat)
            res = await call()
            if not res.is_rate_limited:
                return res
            hold = self.pacer.hold(chat, res.retry_after)
            self._on_hold(BOT if chat is None else chat, hold)
        assert res is not None
        return res

    async def _slot(self, chat: str | None, paced: bool, deadline: float | None) -> bool:
        """A slot by the deadline; the wall clock ends the wait too (the pacer's clock is the
        database's, which a test may hold still)."""
        if deadline is None:
            return await self.pacer.acquire(chat, 2**62, paced=paced)
        left = max(0.0, deadline - self._wall())
        try:
            return await asyncio.wait_for(
                self.pacer.acquire(chat, int(left * 1000), paced=paced), left)
        except TimeoutError:
            return False

    def _held(self, chat: str | None) -> _Held:
        wait_ms = self.pacer.ready_in(chat, level=_priority.get())
        held = self.pacer.held_until(chat) > self.pacer.now_ms()
        reason = "a 429 holds this chat" if held else "no slot within Telegram's limits"
        return _Held(max(1, math.ceil(wait_ms / 1000)),
                    f"not sent: {reason} for {math.ceil(wait_ms / 1000)} s more"
                    " (retried then)")
