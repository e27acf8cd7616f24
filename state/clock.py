"""Injected time and randomness: every timestamp is UTC epoch milliseconds."""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Clock", "CountingEntropy", "Entropy", "ManualClock", "SystemClock", "SystemEntropy"]


class Clock(Protocol):
    """Source of the current time in UTC epoch milliseconds."""

    def now_ms(self) -> int: ...


class Entropy(Protocol):
    """Source of random bytes for tokens and identifiers."""

    def token_bytes(self, n: int) -> bytes: ...


class SystemClock:
    """The wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


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
        # A hash of the draw's number, not the number itself: a short draw taken from a padded
        # counter was all zeros, and every owner id ended in 000000000000.
        self.counter += 1
        out = b""
        block = 0
        while len(out) < n:
            out += hashlib.sha256(f"{self.counter}:{block}".encode()).digest()
            block += 1
        return out[:n]
