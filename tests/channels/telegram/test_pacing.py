"""The pacer: slots within Telegram's limits, what presses cause ahead of new deliveries, and
429 holds. Orders and counts only (the limits are shortened so a test takes no minute; the
production values are checked against the documented ones)."""

from __future__ import annotations

import asyncio

from channels.telegram import pacing
from channels.telegram.holds import BOT, Hold
from channels.telegram.pacing import NORMAL, URGENT, Pacer

GROUP = "-1001987654321"


def clock_ms() -> int:
    return 1_800_000_000_000


def test_the_limits_are_telegrams() -> None:
    assert (pacing.CHAT_INTERVAL_MS, pacing.GROUP_PER_MINUTE, pacing.BOT_PER_SECOND) == \
        (1_000, 20, 30)


def test_what_presses_cause_goes_ahead_of_deliveries_waiting_for_the_same_chat() -> None:
    async def scenario() -> list[str]:
        pacer = Pacer(clock_ms, chat_interval_ms=30)
        order: list[str] = []

        async def send(name: str, level: int) -> None:
            assert await pacer.acquire("42", 10_000, level=level)
            order.append(name)

        first = asyncio.ensure_future(send("delivery 1", NORMAL))
        await asyncio.sleep(0)
        queued = [asyncio.ensure_future(send(f"delivery {i}", NORMAL)) for i in (2, 3, 4)]
        await asyncio.sleep(0)
        urgent = [asyncio.ensure_future(send(name, URGENT))
                  for name in ("settlement", "prompt")]
        await asyncio.gather(first, *queued, *urgent)
        return order

    assert asyncio.run(scenario()) == [
        "delivery 1", "settlement", "prompt", "delivery 2", "delivery 3", "delivery 4"]


def test_one_chat_gets_one_slot_at_a_time_and_other_chats_are_not_held_up() -> None:
    async def scenario() -> tuple[int, int]:
        pacer = Pacer(clock_ms, chat_interval_ms=60_000)
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
