"""Run the real `piw-channels` (or a poll in this process) with Telegram's message limits lifted,
for the benches (they import nothing from tests/: issue 26 item 3).

A bench measures the worker's own cost of a 100-press batch in one chat; paced, each message to
one chat waits up to 1 s. This bench-only launcher replaces the pass's pacer with one without
the message limits (429 holds still apply): the product has no switch for it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when installed: the CLI checks its packages before they load
    from channels.telegram.holds import Hold
    from channels.telegram.pacing import Pacer

CLI_UNPACED = [sys.executable, "-c", "import bench.unpaced as u; u.main()"]


def unpaced_pacer(now_ms: Callable[[], int], holds: dict[str, Hold]) -> Pacer:
    """A pass's pacer without the message limits; holds (429s) still apply."""
    from channels.telegram import pacing

    return pacing.Pacer(now_ms, holds, chat_interval_ms=0, group_per_minute=2**31,
                        bot_per_second=2**31)


_PACED: list[Callable[[Callable[[], int], dict[str, Hold]], Pacer]] = []


def install() -> None:
    """Every poll pass of this process paces nothing but 429 holds."""
    from channels.telegram import pacing

    if not _PACED:
        _PACED.append(pacing.new_pacer)
    pacing.new_pacer = unpaced_pacer


def paced() -> None:
    """Every poll pass of this process paces to Telegram's limits again (after `install`)."""
    from channels.telegram import pacing

    if _PACED:
        pacing.new_pacer = _PACED[0]  # type: ignore[assignment]


def main() -> None:
    from adapters.cli.main import main as cli_main  # checks the packages first

    install()
    cli_main()
