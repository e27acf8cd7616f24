"""Run the real `piw-channels` in a child process whose wall clock is shifted.

`PIW_TEST_CLOCK_OFFSET_MS=<ms>` moves the child's clock that far ahead (or back, negative), so
that a test can let an hour pass between two real runs without waiting for it. The shift is put
in by replacing the clock the database opens with (test-only: the product never reads this
variable).
"""

from __future__ import annotations

import os
import sys
import time

CLOCK_OFFSET_ENV = "PIW_TEST_CLOCK_OFFSET_MS"
CLI_SHIFTED = [sys.executable, "-c", "import tests.shifted_clock as s; s.main()"]


class ShiftedClock:
    """The wall clock, `offset_ms` away."""

    def __init__(self, offset_ms: int) -> None:
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms


def install() -> None:
    """Open every database of this process with the clock `$PIW_TEST_CLOCK_OFFSET_MS` away."""
    import state.database

    offset = int(os.environ.get(CLOCK_OFFSET_ENV) or 0)
    if offset:
        state.database.SystemClock = lambda: ShiftedClock(offset)  # type: ignore[assignment,misc]


def main() -> None:
    from adapters.cli.main import main as cli_main

    install()
    cli_main()
