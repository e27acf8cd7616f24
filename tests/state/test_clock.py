"""The injected time and entropy of tests: deterministic, and as varied as the real ones where
it matters (an owner id is the hex of 6 drawn bytes)."""

from __future__ import annotations

from state.clock import CountingEntropy, ManualClock


def test_counting_entropy_differs_in_every_length_drawn() -> None:
    entropy = CountingEntropy()
    short = [entropy.token_bytes(6) for _ in range(1000)]
    assert len(set(short)) == 1000
    # Owner ids are `...:<6 bytes hex>`; they once all ended in 000000000000.
    assert len({b[-3:] for b in short}) > 900
    assert len({b[:3] for b in short}) > 900
    assert {len(entropy.token_bytes(n)) for n in (1, 6, 12, 32, 100)} == {1, 6, 12, 32, 100}


def test_counting_entropy_is_the_same_sequence_each_time() -> None:
    assert [CountingEntropy().token_bytes(8) for _ in range(2)] == \
        [CountingEntropy().token_bytes(8) for _ in range(2)]


def test_the_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(now=1_000)
    assert clock.now_ms() == clock.now_ms() == 1_000
    clock.advance(500)
    assert clock.now_ms() == 1_500
