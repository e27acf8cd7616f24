"""Injected time and randomness: every timestamp is UTC epoch milliseconds."""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Protocol


class Clock(Protocol):
    """Source of the current time in UTC epoch milliseconds."""

    def now_ms(self) -> int: ...


class Entropy(Protocol):
    """Source of random bytes for tokens and identifiers."""

    def token_bytes(self, n: int) -> bytes: ...


# Test-only: shifts the wall clock of a child process (the once-an-hour alert tests).
CLOCK_OFFSET_ENV = "PIW_CHANNELS_TEST_CLOCK_OFFSET_MS"


class SystemClock:
    """The wall clock (shifted by $PIW_CHANNELS_TEST_CLOCK_OFFSET_MS when a test sets it)."""

    def __init__(self) -> None:
        self.offset_ms = int(os.environ.get(CLOCK_OFFSET_ENV) or 0)

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms


class SystemEntropy:
    """The operating system's CSPRNG."""

    def token_bytes(self, n: int) -> bytes:
        return secrets.token_bytes(n)


@dataclass
class ManualClock:
    """A clock that only moves when told to (tests and simulations)."""

    now: int = 1_767_225_600_000  # 2026-01-01T00:00:00Z

    def now_ms(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@dataclass
class CountingEntropy:
    """Deterministic, distinct byte strings (tests)."""

    counter: int = field(default=0)

    def token_bytes(self, n: int) -> bytes:
        self.counter += 1
        return self.counter.to_bytes(8, "big").rjust(n, b"\x00")[:n]
