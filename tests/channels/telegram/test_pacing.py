"""The pacer: slots within Telegram's limits, what presses cause ahead of new deliveries, and
429 holds. Orders and counts only (the limits are shortened so a test takes no minute; the
production values are checked against the documented ones)."""

from __future__ import annotations

import asyncio

from channels.telegram import pacing
from channels.telegram.holds import BOT, Hold
from channels.telegram.pacing import FRESH, NORMAL, SETTLING, URGENT, Pacer

GROUP = "-1001987654321"


def clock_ms() -> int:
    return 1_800_000_000_000


def test_the_limits_are_telegrams() -> None:
    # About one message a second to one chat, with short bursts; 20 a minute to a group; 30 a
    # second for the bot (the Bot FAQ).
    assert (pacing.CHAT_INTERVAL_MS, pacing.CHAT_BURST, pacing.GROUP_PER_MINUTE,
            pacing.BOT_PER_SECOND) == (1_000, 3, 20, 30)


def test_a_prompt_then_a_new_question_then_settlements_go_ahead_of_a_backlog() -> None:
    async def scenario() -> list[str]:
        pacer = Pacer(clock_ms, chat_interval_ms=30, chat_burst=1)  # the order, one by one
        order: list[str] = []

        async def send(name: str, level: int) -> None:
            assert await pacer.acquire("42", 10_000, level=level)
            order.append(name)

        first = asyncio.ensure_future(send("delivery 1", NORMAL))
        await asyncio.sleep(0)
        queued = [asyncio.ensure_future(send(f"delivery {i}", NORMAL)) for i in (2, 3, 4)]
        await asyncio.sleep(0)
        ahead = [asyncio.ensure_future(send(name, level)) for name, level in (
            ("settlement", SETTLING), ("new question", FRESH), ("prompt", URGENT))]
        await asyncio.gather(first, *queued, *ahead)
        return order

    assert asyncio.run(scenario()) == [
        "delivery 1", "prompt", "new question", "settlement", "delivery 2", "delivery 3",
        "delivery 4"]


class Monotonic:
    """The pacer's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.ms = 5_000_000

    def __call__(self) -> int:
        return self.ms


def test_one_chat_gets_a_short_burst_then_one_message_a_second() -> None:
    async def scenario() -> list[object]:
        mono = Monotonic()
        pacer = Pacer(clock_ms, mono_ms=mono)
        burst = [await pacer.acquire("42", 0, level=URGENT) for _ in range(3)]
        seen: list[object] = [burst, await pacer.acquire("42", 0, level=URGENT),
                              pacer.ready_in("42", level=URGENT)]
        mono.ms += 400
        seen.append(pacer.ready_in("42", level=URGENT))
        mono.ms += 600
        seen += [await pacer.acquire("42", 0, level=URGENT), pacer.ready_in("43", level=URGENT)]
        mono.ms += 60_000  # a minute later the bucket is full again, never fuller
        seen.append([await pacer.acquire("42", 0, level=URGENT) for _ in range(4)])
        return seen

    assert asyncio.run(scenario()) == [
        [True, True, True], False, 1_000, 600, True, 0, [True, True, True, False]]


def test_settlements_and_the_backlog_leave_the_last_slot_to_a_prompt_or_a_new_question() -> None:
    async def scenario() -> list[object]:
        mono = Monotonic()
        pacer = Pacer(clock_ms, mono_ms=mono)
        backlog = [await pacer.acquire("42", 0, level=NORMAL) for _ in range(3)]
        seen: list[object] = [backlog, pacer.ready_in("42", level=SETTLING),
                              pacer.ready_in("42", level=FRESH)]
        seen.append(await pacer.acquire("42", 0, level=FRESH))  # the slot kept for it
        seen.append(pacer.ready_in("42", level=URGENT))
        mono.ms += 2_000  # two slots back: the backlog may take one, and leaves one
        seen += [await pacer.acquire("42", 0, level=NORMAL),
                 await pacer.acquire("42", 0, level=NORMAL),
                 await pacer.acquire("42", 0, level=URGENT)]
        return seen

    assert asyncio.run(scenario()) == [
        [True, True, False], 1_000, 0, True, 1_000, True, False, True]


def test_other_chats_are_not_held_up_by_a_busy_one() -> None:
    async def scenario() -> tuple[int, int]:
        pacer = Pacer(clock_ms, chat_interval_ms=60_000, chat_burst=1)
        same = [asyncio.ensure_future(pacer.acquire("42", 120_000)) for _ in range(3)]
        others = [asyncio.ensure_future(pacer.acquire(str(100 + i), 120_000)) for i in range(3)]
        await asyncio.sleep(0.05)
        done = sum(f.done() for f in same), sum(f.done() for f in others)
        for f in same:
            f.cancel()
        return done

    assert asyncio.run(scenario()) == (1, 3)


def test_the_bot_wide_limit_spans_every_chat() -> None:
    async def scenario() -> int:
        pacer = Pacer(clock_ms, bot_per_second=3)
        waits = [asyncio.ensure_future(pacer.acquire(str(i), 10_000)) for i in range(5)]
        await asyncio.sleep(0)
        granted = sum(f.done() for f in waits)
        assert all(await asyncio.gather(*waits))  # the last two within the next second
        return granted

    assert asyncio.run(scenario()) == 3


def test_a_group_gets_at_most_its_per_minute_slots_and_a_later_one_is_refused() -> None:
    async def scenario() -> list[bool]:
        pacer = Pacer(clock_ms, chat_interval_ms=0, group_per_minute=2)
        return [await pacer.acquire(GROUP, 5_000) for _ in range(3)]

    assert asyncio.run(scenario()) == [True, True, False]  # the 3rd: only after a minute


def test_a_hold_refuses_its_chat_at_once_for_every_kind_of_call_and_the_bot_hold_all() -> None:
    async def scenario() -> list[bool]:
        pacer = Pacer(clock_ms)
        pacer.hold("42", 30)
        results = [await pacer.acquire("42", 10_000),
                   await pacer.acquire("42", 10_000, paced=False),
                   await pacer.acquire("43", 10_000)]
        pacer.hold(None, 30)
        results += [await pacer.acquire("44", 10_000),
                    await pacer.acquire(None, 10_000, paced=False)]
        return results

    assert asyncio.run(scenario()) == [False, False, True, False, False]


def test_a_hold_that_ends_before_the_deadline_is_waited_for() -> None:
    async def scenario() -> tuple[bool, bool]:
        pacer = Pacer(clock_ms, holds={"42": Hold(clock_ms() - 1_000, clock_ms() + 1_000)})
        now = [clock_ms()]
        pacer.now_ms = lambda: now[0]
        waiting = asyncio.ensure_future(pacer.acquire("42", 60_000))
        await asyncio.sleep(0.05)
        before = waiting.done()
        now[0] += 1_000  # the hold is over (the database's clock moved)
        return before, await waiting

    assert asyncio.run(scenario()) == (False, True)


def test_a_longer_hold_never_shortens_one_in_force() -> None:
    pacer = Pacer(clock_ms)
    long = pacer.holds.setdefault(BOT, Hold(clock_ms(), clock_ms() + 60_000))
    assert pacer.hold(None, 5) == long
